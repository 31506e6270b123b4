// The compare page: one attention layer, two sentences, and what happens to
// the words they share ("bank": same input vector, different context vector).

import { api } from "./api.js";
import { byTestId, downloadJson, el, fillDatalist, initialData } from "./dom.js";
import { clearFieldErrors, markStale, showFieldError, showFieldErrors } from "./feedback.js";
import { drawHeatmap } from "./heatmap.js";
import { dimLabels, tokenLabels } from "./labels.js";
import { renderEmbeddingNotice } from "./explorer-notices.js";
import { seededLike } from "./explorer-spec.js";
import { LIMITS, MODEL_VECTORS } from "./limits.js";
import { modelDim, modelVectors } from "./model-vectors.js";
import { average } from "./pipeline.js";
import { readCompareState, writeCompareState } from "./state.js";
import { capTokens, splitSentence } from "./tokens.js";

const init = initialData();
const VOCAB = init.vocabulary || {};
const MAX_DIM = LIMITS.max_dim;
// Shared words shown as cards; more are listed in a folded table, most changed first.
const CARDS = 3;
const PRESETS = init.presets.filter((p) => p.compare_tokens);
const DEFAULT_PRESET = "bank-raw";
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);

let last = null;
let seq = 0;
let auto = null; // {kind, words, why}: the vectors chosen for words outside the toy vocabulary

/** The presets' specs came with the page (the same as GET /api/presets/{name}). */
function presetSpec(name) {
  return (PRESETS.find((p) => p.name === name) || PRESETS[0]).spec;
}

const averageHeads = (trace) => average(trace.heads.map((h) => h.attn_weights));

// Wide (model) vectors show their first 8 numbers; the plots below show all of them.
const vectorText = (v) =>
  v.length <= 12
    ? `[${v.map((x) => x.toFixed(3)).join(", ")}]`
    : `[${v.slice(0, 8).map((x) => x.toFixed(3)).join(", ")}, … ${v.length - 8} more]`;

// What context did to a shared word, read from the cosine of its two context vectors
// (the same thresholds are stated on the page):
//  unchanged  cosine ≥ 0.9995 (it prints as 1.000) and lengths within 0.1 %: the same vector;
//  slightly   cosine ≥ 0.95: the two vectors are less than about 18° apart;
//  strongly   anything further apart.
export const UNCHANGED_COSINE = 0.9995;
export const UNCHANGED_RELATIVE_DISTANCE = 1e-3;
export const SLIGHT_COSINE = 0.95;

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

/** "unchanged" | "slightly" | "strongly", from the API's figures and the two context vectors. */
export function verdict(shared, contextA, contextB) {
  const scale = Math.max(norm(contextA), norm(contextB), 1e-12);
  if (shared.output_cosine >= UNCHANGED_COSINE && shared.output_distance / scale <= UNCHANGED_RELATIVE_DISTANCE) return "unchanged";
  return shared.output_cosine >= SLIGHT_COSINE ? "slightly" : "strongly";
}

const VERDICT_TEXT = {
  unchanged: "Unchanged by context",
  slightly: "Slightly changed by context",
  strongly: "Strongly changed by context",
};

// Positions count from 0 everywhere on this page, as in the plots' labels and the JSON.
const where = (s) => `A·${s.position_a}, B·${s.position_b}`;

function sameInput(s) {
  return s.input_cosine >= UNCHANGED_COSINE && s.input_distance <= 1e-6;
}

function card(s, a, b, kind) {
  const inputSame = sameInput(s);
  const cause = inputSame ? "" : ` (its inputs already differed: cosine ${s.input_cosine.toFixed(3)})`;
  return el("article", { class: "shared-card", "data-testid": "shared-card", "data-token": s.token, "data-verdict": kind }, [
    el("h2", {}, ["“", el("span", { "data-testid": "shared-token", text: s.token }), `” at ${where(s)}`]),
    el("span", { class: `big ${inputSame ? "same" : ""}`, "data-testid": "input-cosine", text: s.input_cosine.toFixed(3) }),
    el("span", { class: "what", text: inputSame ? "cosine of its two input vectors: identical going in." : "cosine of its two input vectors: already different going in." }),
    el("span", { class: `big verdict-${kind}`, "data-testid": "output-cosine", text: s.output_cosine.toFixed(3) }),
    el("span", { class: "what", "data-testid": "verdict" }, [
      el("span", { class: `verdict verdict-${kind}`, text: VERDICT_TEXT[kind] }),
      `${cause}: cosine ${s.output_cosine.toFixed(3)} between its context vectors after attention, distance ${s.output_distance.toFixed(3)}.`,
    ]),
    el("dl", { class: "vectors" }, [
      el("dt", { text: `context_vec in A (A·${s.position_a})` }),
      el("dd", { "data-testid": "context-a", text: vectorText(a.output[s.position_a]) }),
      el("dt", { text: `context_vec in B (B·${s.position_b})` }),
      el("dd", { "data-testid": "context-b", text: vectorText(b.output[s.position_b]) }),
    ]),
  ]);
}

function foldedTable(rest) {
  return el("details", { class: "shared-more card", "data-testid": "shared-more" }, [
    el("summary", { text: `${rest.length} more shared word${rest.length === 1 ? "" : "s"}, less changed` }),
    el("table", { class: "shared-table" }, [
      el("thead", {}, el("tr", {}, ["word", "positions", "what context did", "cosine after", "distance"].map((t) => el("th", { scope: "col", text: t })))),
      el("tbody", {}, rest.map(({ s, kind }) =>
        el("tr", { "data-testid": "shared-row", "data-token": s.token, "data-verdict": kind }, [
          el("th", { scope: "row", text: s.token }),
          el("td", { text: where(s) }),
          el("td", {}, el("span", { class: `verdict verdict-${kind}`, text: kind })),
          el("td", { class: "num", text: s.output_cosine.toFixed(3) }),
          el("td", { class: "num", text: s.output_distance.toFixed(3) }),
        ]),
      )),
    ]),
  ]);
}

/** The shared words, most changed first (lowest cosine); the first few as cards. */
export function rankShared(shared, a, b) {
  return shared
    .map((s) => ({ s, kind: verdict(s, a.output[s.position_a], b.output[s.position_b]) }))
    .sort((x, y) => x.s.output_cosine - y.s.output_cosine || x.s.position_a - y.s.position_a);
}

function renderShared(ranked, a, b) {
  const box = $("shared-panels");
  if (!ranked.length) {
    box.replaceChildren(el("p", { class: "card hint", "data-testid": "no-shared", text: "The two sentences share no word: add the same word to both to compare it." }));
    return;
  }
  const legend = el("p", { class: "hint shared-legend", "data-testid": "shared-legend" }, [
    `${ranked.length} shared word${ranked.length === 1 ? "" : "s"}, most changed first. `,
    "Positions count from 0, as in the plots and the JSON (A·1 is the second word of A). ",
    `Unchanged: cosine ≥ ${UNCHANGED_COSINE} and the same length; slightly changed: cosine ≥ ${SLIGHT_COSINE} (less than about 18° apart); strongly: below that.`,
  ]);
  const cards = ranked.slice(0, CARDS).map(({ s, kind }) => card(s, a, b, kind));
  const rest = ranked.slice(CARDS);
  box.replaceChildren(legend, ...cards, ...(rest.length ? [foldedTable(rest)] : []));
}

async function draw(result, ranked) {
  const shared = ranked.map((r) => r.s);
  const { a, b } = result;
  const la = tokenLabels(a.tokens);
  const lb = tokenLabels(b.tokens);
  const wa = a.num_heads > 1 ? averageHeads(a) : a.heads[0].attn_weights;
  const wb = b.num_heads > 1 ? averageHeads(b) : b.heads[0].attn_weights;
  const sharedA = shared.map((s) => s.position_a);
  const sharedB = shared.map((s) => s.position_b);
  const weightOpts = { kind: "weights", rowTitle: "token that attends", colTitle: "token attended to" };
  const ctxOpts = { kind: "signed", rowTitle: "token", colTitle: "dimension" };
  const diffRows = shared.map((s) => `${s.token} A·${s.position_a} B·${s.position_b}`);
  const diff = shared.map((s) => a.output[s.position_a].map((v, j) => v - b.output[s.position_b][j]));
  // One colour range for both context plots, so the same colour means the same number.
  const m = Math.max(...a.output.flat().map(Math.abs), ...b.output.flat().map(Math.abs)) || 1;
  const draws = [
    drawHeatmap($("plot-weights-a"), { ...weightOpts, z: wa, rows: la, cols: la, highlightRows: sharedA, filename: "compare-weights-a" }),
    drawHeatmap($("plot-weights-b"), { ...weightOpts, z: wb, rows: lb, cols: lb, highlightRows: sharedB, filename: "compare-weights-b" }),
    drawHeatmap($("plot-context-a"), { ...ctxOpts, z: a.output, rows: la, cols: dimLabels(a.output[0].length), highlightRows: sharedA, filename: "compare-context-a", zrange: m }),
    drawHeatmap($("plot-context-b"), { ...ctxOpts, z: b.output, rows: lb, cols: dimLabels(b.output[0].length), highlightRows: sharedB, filename: "compare-context-b", zrange: m }),
  ];
  const diffPlot = $("plot-context-diff");
  diffPlot.hidden = diff.length === 0;
  if (diff.length) {
    draws.push(drawHeatmap(diffPlot, { ...ctxOpts, z: diff, rows: diffRows, cols: dimLabels(diff[0].length), rowTitle: "shared token", filename: "compare-context-diff" }));
  }
  await Promise.all(draws);
}

function readForm() {
  return {
    preset: $("cmp-preset").value,
    a: $("tokens-a").value.trim(),
    b: $("tokens-b").value.trim(),
    embedding: $("cmp-embedding").value,
    causal: $("cmp-causal").checked,
  };
}

/** Errors of the API, by the control that caused them (loc without "body"). */
function errorPlace(path) {
  const [field, i] = path;
  if (field === "tokens_a" || field === "tokens_b") {
    const label = field === "tokens_a" ? "Sentence A" : "Sentence B";
    return { key: field, label: Number.isInteger(i) ? `${label}, word ${i + 1}` : label };
  }
  if (field === "embedding") return { key: "embedding", label: "Embedding" };
  if (field === "causal") return { key: "general", label: "Causal" };
  return { key: "general" };
}

function stale(reason) {
  markStale($("compare-results"), $("stale-note"), reason);
  markStale($("shared-panels"), null, reason);
}

/** The words of a sentence input, capped at the server's limits (the input shows what is kept). */
function sentenceTokens(id, noteId) {
  const input = $(id);
  const { tokens, notes } = capTokens(splitSentence(input.value), { maxTokens: LIMITS.max_tokens, maxChars: LIMITS.max_token_chars });
  if (notes.length) input.value = tokens.join(" ");
  $(noteId).textContent = notes.join(" ");
  return tokens;
}

async function run() {
  const tokensA = sentenceTokens("tokens-a", "note-tokens_a");
  const tokensB = sentenceTokens("tokens-b", "note-tokens_b");
  const form = readForm();
  writeCompareState(form);
  clearFieldErrors(root);
  chooseVectors(form, [...tokensA, ...tokensB]);
  const problems = [];
  if (!tokensA.length) problems.push(["tokens_a", "Type at least one word."]);
  if (!tokensB.length) problems.push(["tokens_b", "Type at least one word."]);
  if (problems.length) {
    seq++; // an answer still on its way is out of date
    for (const [field, msg] of problems) showFieldError(root, field, msg);
    stale(problems.map(([, msg]) => msg).join(" "));
    $("status").textContent = "";
    return;
  }
  const mine = ++seq;
  $("status").textContent = "Computing…";
  try {
    const body = await compareBody(form, tokensA, tokensB);
    if (mine !== seq) return;
    const result = await api.compare(body);
    if (mine !== seq) return;
    last = { request: body, response: result };
    stale(null);
    const ranked = rankShared(result.shared, result.a, result.b);
    renderShared(ranked, result.a, result.b);
    await draw(result, ranked);
    $("status").textContent = "";
    root.dataset.ready = String(mine);
  } catch (err) {
    if (mine !== seq) return;
    const shown = showFieldErrors(root, err, errorPlace);
    stale(shown.join(" "));
    $("status").textContent = "";
  }
}

/**
 * Words outside the toy vocabulary: every word gets MiniLM's vectors (hashed ones without
 * a MiniLM checkpoint), as the explorer does, and the notice says so; back to the toy
 * vocabulary once every word is in it again.
 */
function chooseVectors(form, words) {
  const unknown = [...new Set(words.filter((t) => !(t in VOCAB)))];
  if (auto && !unknown.length && form.embedding === auto.kind) {
    form.embedding = "vocabulary"; // every word is the toy vocabulary's again
    $("cmp-embedding").value = form.embedding;
    auto = null;
    writeCompareState(form);
  }
  if (form.embedding === "vocabulary" && unknown.length) {
    form.embedding = MODEL_VECTORS ? "model" : "hashed";
    $("cmp-embedding").value = form.embedding;
    auto = { kind: form.embedding, words: unknown, why: MODEL_VECTORS ? null : "this server has no MiniLM checkpoint" };
    writeCompareState(form);
  }
  renderEmbeddingNotice($("embedding-notice"), auto, form.embedding, {
    onHashed: () => {
      auto = { ...auto, kind: "hashed" };
      $("cmp-embedding").value = "hashed";
      run();
    },
    dim: modelDim(MAX_DIM),
  });
}

/** POST /api/compare's body: the preset's layer with the form's vectors and mask. */
async function compareBody(form, tokensA, tokensB) {
  const spec = presetSpec(form.preset);
  let embedding = form.embedding === "hashed" ? { kind: "hashed", dim: 4, seed: 0 } : spec.embedding;
  let projection = spec.projection;
  if (form.embedding === "model") {
    // One vector per distinct word, as vocabulary words: a word shared by A and B gets the same one.
    // The toy words are replaced too, since a vocabulary's vectors must all be as wide.
    const words = [...new Set([...tokensA, ...tokensB, ...Object.keys(VOCAB)])];
    const vectors = await modelVectors(words, modelDim(MAX_DIM));
    embedding = { kind: "vocabulary", extra: Object.fromEntries(words.map((w, i) => [w, vectors[i]])) };
    if (projection.kind === "explicit") projection = seededLike(projection);
  }
  return {
    tokens_a: tokensA,
    tokens_b: tokensB,
    embedding,
    projection,
    num_heads: spec.num_heads,
    causal: form.causal,
    scale: spec.scale,
    mode: spec.mode,
  };
}

function boot() {
  fillDatalist(document.getElementById("vocab-list"), Object.keys(VOCAB));
  const select = $("cmp-preset");
  select.replaceChildren(...PRESETS.map((p) => el("option", { value: p.name, text: p.title })));
  const url = readCompareState();
  const preset = PRESETS.find((p) => p.name === (url.preset || DEFAULT_PRESET)) || PRESETS[0];
  select.value = preset.name;
  $("tokens-a").value = url.a ?? "stream bank mud";
  $("tokens-b").value = url.b ?? preset.compare_tokens.join(" ");
  $("cmp-embedding").value = ["hashed", "model"].includes(url.embedding) ? url.embedding : "vocabulary";
  $("cmp-causal").checked = url.causal ?? false;
  $("compare-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run();
  });
  for (const id of ["cmp-preset", "cmp-embedding", "cmp-causal"]) $(id).addEventListener("change", run);
  $("download-trace").addEventListener("click", () => last && downloadJson("attention-compare.json", last));
  run();
}

boot();
