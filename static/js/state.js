// View state <-> URL query string, so a view can be copied, reloaded and shared.
// history.replaceState only: editing does not flood the back button.

function jsonParam(params, key) {
  const raw = params.get(key);
  if (raw === null) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** Explorer: {preset, spec | null, view}. spec is null when the URL names no tokens. */
export function readExplorerState(search = window.location.search) {
  const p = new URLSearchParams(search);
  const preset = p.get("preset");
  const view = p.get("view") || "0";
  const tokens = p.getAll("t");
  if (tokens.length === 0) return { preset, spec: null, view };
  const spec = { tokens };
  const src = p.getAll("src");
  if (src.length) spec.source_tokens = src;
  const embedding = jsonParam(p, "emb");
  if (embedding) spec.embedding = embedding;
  const sourceEmbedding = jsonParam(p, "semb");
  if (sourceEmbedding) spec.source_embedding = sourceEmbedding;
  const projection = jsonParam(p, "proj");
  if (projection) spec.projection = projection;
  if (p.has("heads")) spec.num_heads = Number.parseInt(p.get("heads"), 10);
  if (p.has("causal")) spec.causal = p.get("causal") === "1";
  if (p.has("scale")) {
    const s = p.get("scale");
    spec.scale = s === "sqrt_dk" || s === "none" ? s : Number(s);
  }
  if (p.has("mode")) spec.mode = p.get("mode");
  return { preset, spec, view };
}

export function writeExplorerState({ preset, spec, view }) {
  const p = new URLSearchParams();
  if (preset) p.set("preset", preset);
  for (const t of spec.tokens) p.append("t", t);
  for (const t of spec.source_tokens || []) p.append("src", t);
  p.set("emb", JSON.stringify(spec.embedding));
  if (spec.source_embedding) p.set("semb", JSON.stringify(spec.source_embedding));
  p.set("proj", JSON.stringify(spec.projection));
  p.set("heads", String(spec.num_heads));
  p.set("causal", spec.causal ? "1" : "0");
  p.set("scale", String(spec.scale));
  p.set("mode", spec.mode);
  if (view && view !== "0") p.set("view", view);
  replaceQuery(p);
}

export function replaceQuery(params) {
  const url = `${window.location.pathname}?${params}`;
  if (url !== `${window.location.pathname}${window.location.search}`) {
    window.history.replaceState(null, "", url);
  }
}

/** Compare: {preset, a, b, embedding, causal}; tokens as space-separated strings. */
export function readCompareState(search = window.location.search) {
  const p = new URLSearchParams(search);
  return {
    preset: p.get("preset"),
    a: p.get("a"),
    b: p.get("b"),
    embedding: p.get("emb"),
    causal: p.has("causal") ? p.get("causal") === "1" : null,
  };
}

export function writeCompareState({ preset, a, b, embedding, causal }) {
  const p = new URLSearchParams();
  p.set("preset", preset);
  p.set("a", a);
  p.set("b", b);
  p.set("emb", embedding);
  p.set("causal", causal ? "1" : "0");
  replaceQuery(p);
}

/** Lessons: slider positions. */
export function readLessonState(search = window.location.search) {
  const p = new URLSearchParams(search);
  return { dim: p.get("dim"), scale: p.get("scale"), scores: p.get("scores") };
}

export function writeLessonState({ dim, scale, scores }) {
  const p = new URLSearchParams();
  p.set("dim", dim);
  p.set("scale", scale);
  p.set("scores", scores);
  replaceQuery(p);
}
