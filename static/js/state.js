// View state <-> URL query string, so a view can be copied, reloaded and shared.
// history.replaceState only: editing does not flood the back button.

// Long views (64 tokens of 64 characters, explicit 256-wide vectors) do not fit a link:
// above this many characters the URL keeps only the example and the page says so.
export const URL_LIMIT = 2000;

/**
 * JSON whose double quotes travel as "~" (a "~" inside a string is written \u007e), so
 * that a spec in the URL is not tripled by %22 escapes. unpackJson reads this and plain
 * JSON (links made before) alike.
 */
export function packJson(value) {
  return JSON.stringify(value, (_, v) => (isMatrix(v) ? packMatrix(v) : v))
    .replace(/~/g, "\\u007e")
    .replace(/"/g, "~");
}

export function unpackJson(text) {
  if (text === null || text === undefined) return undefined;
  try {
    const json = text.includes('"') ? text : text.replace(/~/g, '"');
    return JSON.parse(json, (_, v) => (typeof v === "string" && F32.test(v) ? unpackMatrix(v) : v));
  } catch {
    return undefined;
  }
}

// Matrices of numbers (explicit vectors, W matrices) travel as their float32 bytes in
// base64url, "f32:ROWSxCOLS:…": about 5.3 characters a number instead of ~11 for its
// decimal. The server computes in float32, so it reads back the very same numbers.
const F32 = /^f32:(\d+)x(\d+):([A-Za-z0-9_-]*)$/;

function isMatrix(v) {
  return (
    Array.isArray(v) &&
    v.length > 0 &&
    Array.isArray(v[0]) &&
    v[0].length > 0 &&
    v.every((row) => Array.isArray(row) && row.length === v[0].length && row.every((x) => typeof x === "number"))
  );
}

function packMatrix(m) {
  const rows = m.length;
  const cols = m[0].length;
  const view = new DataView(new ArrayBuffer(rows * cols * 4));
  m.forEach((row, i) => row.forEach((x, j) => view.setFloat32((i * cols + j) * 4, x, true)));
  let binary = "";
  for (const byte of new Uint8Array(view.buffer)) binary += String.fromCharCode(byte);
  const b64 = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return `f32:${rows}x${cols}:${b64}`;
}

function unpackMatrix(text) {
  const [, rows, cols, b64] = text.match(F32);
  const binary = atob(b64.replace(/-/g, "+").replace(/_/g, "/"));
  const view = new DataView(new ArrayBuffer(binary.length));
  for (let i = 0; i < binary.length; i++) view.setUint8(i, binary.charCodeAt(i));
  const r = Number(rows);
  const c = Number(cols);
  if (binary.length !== r * c * 4) throw new Error("matrix size does not match its bytes");
  return Array.from({ length: r }, (_, i) => Array.from({ length: c }, (_, j) => view.getFloat32((i * c + j) * 4, true)));
}

// JSON punctuation that is legal unescaped in a query string: left as it is.
const KEEP = /%(2C|3A|5B|5D|7B|7D|40|24|3B|2F|7C)/gi;
const encodeValue = (v) =>
  encodeURIComponent(String(v))
    .replace(KEEP, (m) => decodeURIComponent(m))
    .replace(/%20/g, "+");

/** A query string from [key, value] pairs, shorter than URLSearchParams writes it. */
export function buildQuery(pairs) {
  return pairs.map(([k, v]) => `${k}=${encodeValue(v)}`).join("&");
}

/** JSON with sorted keys: two specs are the same when these strings are. */
export function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

const same = (a, b) => canonical(a) === canonical(b);

/**
 * Explorer: {preset, overrides, view, focus, headView}. `overrides` holds only the
 * spec fields the URL sets; the page lays them over the preset's spec.
 */
export function readExplorerState(search = window.location.search) {
  const p = new URLSearchParams(search);
  const overrides = {};
  const tokens = p.getAll("t");
  if (tokens.length) overrides.tokens = tokens;
  const src = p.getAll("src");
  if (src.length) overrides.source_tokens = src;
  if (p.get("cross") === "0") overrides.source_tokens = null;
  for (const [key, field] of [["emb", "embedding"], ["semb", "source_embedding"], ["proj", "projection"]]) {
    if (!p.has(key)) continue;
    const value = unpackJson(p.get(key));
    if (value !== undefined) overrides[field] = value;
  }
  if (p.has("heads")) overrides.num_heads = Number.parseInt(p.get("heads"), 10);
  if (p.has("causal")) overrides.causal = p.get("causal") === "1";
  if (p.has("scale")) {
    const s = p.get("scale");
    overrides.scale = s === "sqrt_dk" || s === "none" ? s : Number(s);
  }
  if (p.has("mode")) overrides.mode = p.get("mode");
  const focus = p.has("focus") ? Number.parseInt(p.get("focus"), 10) : null;
  return {
    preset: p.get("preset"),
    overrides,
    view: p.get("view") || "0",
    focus: Number.isInteger(focus) && focus >= 0 ? focus : null,
    headView: p.get("hv") === "bars" ? "bars" : "lines",
  };
}

/**
 * Write the view into the URL: the preset it started from and only what differs from
 * it. Returns the length of the full query; when that is over URL_LIMIT the URL keeps
 * just the preset (and the page should say so).
 */
export function writeExplorerState({ preset, spec, view, focus, headView }, base = null) {
  const pairs = [];
  if (preset) pairs.push(["preset", preset]);
  const b = base || {};
  if (!same(spec.tokens, b.tokens)) for (const t of spec.tokens) pairs.push(["t", t]);
  if (!same(spec.source_tokens || null, b.source_tokens || null)) {
    if (spec.source_tokens) for (const t of spec.source_tokens) pairs.push(["src", t]);
    else pairs.push(["cross", "0"]);
  }
  if (!same(spec.embedding, b.embedding)) pairs.push(["emb", packJson(spec.embedding)]);
  if (!same(spec.source_embedding || null, b.source_embedding || null)) pairs.push(["semb", packJson(spec.source_embedding || null)]);
  if (!same(spec.projection, b.projection)) pairs.push(["proj", packJson(spec.projection)]);
  if (spec.num_heads !== b.num_heads) pairs.push(["heads", spec.num_heads]);
  if (spec.causal !== b.causal) pairs.push(["causal", spec.causal ? "1" : "0"]);
  if (!same(spec.scale, b.scale)) pairs.push(["scale", spec.scale]);
  if (spec.mode !== b.mode) pairs.push(["mode", spec.mode]);
  if (view && view !== "0") pairs.push(["view", view]);
  if (focus !== null && focus !== undefined) pairs.push(["focus", focus]);
  if (headView === "bars") pairs.push(["hv", "bars"]);
  const full = buildQuery(pairs);
  const kept = full.length > URL_LIMIT ? buildQuery(pairs.filter(([k]) => k === "preset")) : full;
  replaceSearch(kept);
  return full.length;
}

function replaceSearch(query) {
  const url = query ? `${window.location.pathname}?${query}` : window.location.pathname;
  if (url !== `${window.location.pathname}${window.location.search}`) {
    window.history.replaceState(null, "", url);
  }
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
  const head = [["preset", preset]];
  const tail = [["emb", embedding], ["causal", causal ? "1" : "0"]];
  const full = buildQuery([...head, ["a", a], ["b", b], ...tail]);
  // Two sentences of 64 long words do not fit a link: keep the options only.
  replaceSearch(full.length > URL_LIMIT ? buildQuery([...head, ...tail]) : full);
  return full.length;
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
