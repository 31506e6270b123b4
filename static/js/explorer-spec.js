// The explorer's spec, read without the page: its shape, what it lacks, and where an
// error about it belongs. Pure functions (a spec in, facts out), so they stay testable.

import { headsAdvice } from "./feedback.js";
import { LIMITS } from "./limits.js";

export function normalize(spec) {
  return {
    tokens: spec.tokens,
    embedding: spec.embedding || { kind: "vocabulary", extra: {} },
    projection: spec.projection || { kind: "identity" },
    num_heads: spec.num_heads ?? 1,
    causal: spec.causal ?? false,
    scale: spec.scale ?? "sqrt_dk",
    mode: spec.mode || "attention",
    ...(spec.source_tokens ? { source_tokens: spec.source_tokens } : {}),
    ...(spec.source_embedding ? { source_embedding: spec.source_embedding } : {}),
  };
}

/** For vectors other than the toy ones (hand-set W matrices are as tall as those): a seeded
 * projection as wide as the hand-set one, from nn.Linear's init. */
export function seededLike(projection) {
  return { kind: "seeded_linear", d_out: projection.W_query[0].length, seed: 789 };
}

/** The width of the input vectors (x), from the spec alone. */
export function specInputDim(spec) {
  const e = spec.embedding;
  if (e.kind === "vocabulary") {
    const extra = Object.values(e.extra || {});
    return extra.length ? extra[0].length : 4;
  }
  if (e.kind === "explicit") return e.vectors.length ? e.vectors[0].length : 0;
  return e.dim; // hashed, seeded_random and model
}

/** The query/key width the heads split, when the spec alone tells it (else null). */
export function queryKeyWidth(spec) {
  const p = spec.projection;
  if (spec.mode === "causal_average") return null;
  if (p.kind === "explicit") return p.W_query.length && p.W_query[0].length;
  if (p.kind === "seeded_rand" || p.kind === "seeded_linear") return p.d_out;
  return specInputDim(spec) || null;
}

/** Words of the spec that its toy vocabulary (with its added words) lacks. */
export function unknownWords(spec, vocabulary) {
  const e = spec.embedding;
  if (e.kind !== "vocabulary") return [];
  const known = new Set([...Object.keys(vocabulary), ...Object.keys(e.extra || {})]);
  const all = [...spec.tokens, ...((!spec.source_embedding && spec.source_tokens) || [])];
  return [...new Set(all.filter((t) => !known.has(t)))];
}

/** Explicit vectors follow the tokens: kept rows stay, new words get their toy vector or zeros. */
export function resizeExplicit(embedding, oldTokens, tokens, vocabulary) {
  if (!embedding || embedding.kind !== "explicit") return embedding;
  const dim = embedding.vectors.length ? embedding.vectors[0].length : 4;
  const old = new Map(oldTokens.map((t, i) => [t, embedding.vectors[i]]));
  return {
    kind: "explicit",
    vectors: tokens.map((t) => old.get(t) || (vocabulary[t] && vocabulary[t].length === dim ? vocabulary[t].slice() : Array(dim).fill(0))),
  };
}

export const LABELS = {
  tokens: "Tokens",
  source_tokens: "Source tokens",
  embedding: "Embedding",
  emb_dim: "Embedding dim",
  emb_seed: "Embedding seed",
  projection: "Projection",
  d_out: "d_out",
  proj_seed: "Projection seed",
  num_heads: "Heads",
  scale: "Scaling",
  scale_number: "The scale factor",
  mode: "Mode",
  causal: "Causal",
  grids: "This number",
  options: "This option",
};

// Pydantic names the kind of a tagged union in its loc: ["projection", "seeded_rand", "seed"].
const KINDS = new Set(["vocabulary", "explicit", "seeded_random", "hashed", "identity", "seeded_rand", "seeded_linear"]);

/** Where an error of the API (its loc without "body") is shown, and what its control is called. */
export function errorPlace(fullPath, spec) {
  const path = KINDS.has(fullPath[1]) ? [fullPath[0], ...fullPath.slice(2)] : fullPath;
  const [field, sub, i, j] = path;
  const at = (key, label = LABELS[key]) => ({ key, label });
  if (field === "tokens" || field === "source_tokens") {
    return Number.isInteger(sub) ? at(field, `${LABELS[field]}: token ${sub + 1}`) : at(field);
  }
  if (field === "embedding" || field === "source_embedding") {
    if (sub === "dim") return at("emb_dim");
    if (sub === "seed") return at("emb_seed");
    if (sub === "vectors") return Number.isInteger(j) ? at("grids", `x row ${i + 1}, column ${j + 1}`) : at("grids", "The vectors");
    if (sub === "extra") return at("tokens", typeof i === "string" ? `The vector of “${i}”` : "The added words");
    return at("embedding");
  }
  if (field === "projection") {
    if (sub === "d_out") return at("d_out");
    if (sub === "seed") return at("proj_seed");
    if (typeof sub === "string" && sub.startsWith("W_")) {
      return at("grids", Number.isInteger(j) ? `${sub} row ${i + 1}, column ${j + 1}` : sub);
    }
    return at("projection");
  }
  if (field === "scale") return typeof spec.scale === "number" ? at("scale_number") : at("scale");
  if (field in LABELS) return at(field);
  return { key: "general" };
}

/** What the page can tell before asking the server: the reason, beside its control. */
export function localProblems(spec) {
  const problems = [];
  const add = (key, text) => problems.push([key, text]);
  if (spec.tokens.length === 0) add("tokens", "Add at least one token.");
  if (spec.source_tokens && spec.source_tokens.length === 0) add("source_tokens", "Add at least one source token, or turn cross-attention off.");
  const heads = spec.num_heads;
  if (!Number.isInteger(heads) || heads < 1) add("num_heads", "Heads must be a whole number, at least 1.");
  else if (heads > LIMITS.max_heads) add("num_heads", `Heads: this server takes at most ${LIMITS.max_heads} (ATTENTION_VIZ_MAX_HEADS).`);
  else {
    const width = queryKeyWidth(spec);
    if (width && width % heads !== 0) {
      add("num_heads", headsAdvice(width, heads, LIMITS.max_heads));
    }
  }
  const e = spec.embedding;
  if ("dim" in e && !(Number.isInteger(e.dim) && e.dim >= 1 && e.dim <= LIMITS.max_dim)) {
    add("emb_dim", `Embedding dim must be a whole number from 1 to ${LIMITS.max_dim}.`);
  }
  const p = spec.projection;
  if ("d_out" in p && !(Number.isInteger(p.d_out) && p.d_out >= 1 && p.d_out <= LIMITS.max_dim)) {
    add("d_out", `d_out must be a whole number from 1 to ${LIMITS.max_dim}.`);
  }
  if (typeof spec.scale === "number" && !(spec.scale > 0 && spec.scale <= LIMITS.max_abs_value)) {
    add("scale_number", "The scale factor must be a number above 0 (at most 1,000,000).");
  }
  return problems;
}
