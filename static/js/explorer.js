// The explorer page: presets, tokens, options, editable numbers and the pipeline.

import { api, clearErrors, showErrors } from "./api.js";
import { byTestId, downloadJson, el, fillDatalist, initialData } from "./dom.js";
import { clone, eyeLike, identity, matrixGrid, refreshGrids } from "./grid.js";
import { dimLabels, tokenLabels } from "./labels.js";
import { MODEL_WIDTH, modelDim, modelVectors } from "./model-vectors.js";
import { drawPipeline } from "./pipeline.js";
import { readExplorerState, writeExplorerState } from "./state.js";
import { renderChips, renderUnknown, splitSentence } from "./tokens.js";

const init = initialData();
const VOCAB = init.vocabulary || {};
const MAX_DIM = (init.limits && init.limits.max_dim) || 256;
const DEFAULT_PRESET = "bank-raw";
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);

const state = {
  preset: null,
  spec: null,
  view: "0",
  trace: null,
  // What was posted for the trace shown: the spec with model embeddings as explicit vectors.
  request: null,
  // The same request with every number written out (POST /api/expand), when asked for.
  expanded: null,
};
let requestSeq = 0;

function normalize(spec) {
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

const isModel = (e) => Boolean(e) && e.kind === "model";

/**
 * The spec as the API takes it. "model" is the page's own embedding kind (it is
 * what the URL keeps); it is sent as explicit MiniLM vectors, one per token.
 */
async function resolve(spec) {
  const out = structuredClone(spec);
  if (isModel(spec.embedding)) out.embedding = { kind: "explicit", vectors: await modelVectors(spec.tokens, spec.embedding.dim) };
  const sourceEmbedding = spec.source_embedding || spec.embedding;
  if (spec.source_tokens && isModel(sourceEmbedding)) {
    const vectors = await modelVectors(spec.source_tokens, sourceEmbedding.dim, ["body", "source_embedding"]);
    out.source_embedding = { kind: "explicit", vectors };
  }
  return out;
}

/** Nothing left to expand: explicit vectors, and explicit (or no) W matrices. */
function writtenOut(request) {
  const explicit = (e) => Boolean(e) && e.kind === "explicit";
  return (
    explicit(request.embedding) &&
    (request.projection.kind === "explicit" || request.projection.kind === "identity") &&
    (!request.source_tokens || explicit(request.source_embedding))
  );
}

/** The current request with every number written out (asks the API once per request). */
function expandedRequest() {
  if (writtenOut(state.request)) return Promise.resolve(state.request);
  if (!state.expanded) state.expanded = api.expand(state.request);
  return state.expanded;
}

/** W_query/W_key/W_value of the trace shown (seeded ones once the API wrote them out), or null. */
async function currentMatrices() {
  const projection = state.request ? state.request.projection : state.spec.projection;
  if (projection.kind === "explicit") return projection;
  const dIn = inputDim();
  if (projection.kind === "identity") {
    return dIn ? { W_query: identity(dIn), W_key: identity(dIn), W_value: identity(dIn) } : null;
  }
  if (!state.request) return null;
  const expanded = await expandedRequest();
  return expanded.projection.kind === "explicit" ? expanded.projection : null;
}

function inputDim() {
  if (state.trace && state.trace.x && state.trace.x.length) return state.trace.x[0].length;
  const e = state.spec.embedding;
  if (e.kind === "vocabulary") return 4;
  if (e.kind === "explicit") return e.vectors.length ? e.vectors[0].length : 0;
  return e.dim; // hashed, seeded_random and model
}

function unknownWords() {
  const e = state.spec.embedding;
  if (e.kind !== "vocabulary") return [];
  const known = new Set([...Object.keys(VOCAB), ...Object.keys(e.extra || {})]);
  const all = [...state.spec.tokens, ...(state.spec.source_tokens || [])];
  return [...new Set(all.filter((t) => !known.has(t)))];
}

// ---------- rendering controls ----------

function renderGallery() {
  const list = $("preset-gallery");
  list.replaceChildren(
    ...init.presets.map((p) =>
      el("li", {}, [
        el("button", {
          type: "button",
          class: "preset",
          "data-testid": `preset-${p.name}`,
          "aria-pressed": String(state.preset === p.name),
          onclick: () => choosePreset(p.name),
        }, [el("strong", { text: p.title }), el("span", { text: p.description }), el("small", { text: p.source })]),
      ]),
    ),
  );
}

function renderControls() {
  const s = state.spec;
  renderChips($("token-chips"), s.tokens, (i) => setTokens(s.tokens.filter((_, j) => j !== i)));
  const e = s.embedding;
  $("opt-embedding").value = e.kind;
  $("opt-emb-dim").value = e.dim ?? inputDim() ?? "";
  $("opt-emb-dim").disabled = !("dim" in e);
  $("opt-emb-dim").max = String(isModel(e) ? modelDim(MAX_DIM) : MAX_DIM);
  const note = $("model-note");
  note.hidden = !isModel(e);
  if (isModel(e)) {
    note.textContent =
      e.dim < MODEL_WIDTH
        ? `MiniLM's word vectors (its embedding table: one fixed vector per word, no context) are 384 numbers wide; ` +
          `this server takes at most ${MAX_DIM} (ATTENTION_VIZ_MAX_DIM), so each is multiplied by one fixed random ` +
          `384 × ${e.dim} matrix, which keeps lengths and angles roughly. Any word works.`
        : "MiniLM's word vectors, all 384 numbers: its embedding table, one fixed vector per word, no context. Any word works.";
  }
  $("opt-emb-seed").value = e.seed ?? "";
  $("opt-emb-seed").disabled = !("seed" in e);
  const p = s.projection;
  $("opt-projection").value = p.kind;
  const seeded = p.kind === "seeded_rand" || p.kind === "seeded_linear";
  $("opt-dout").value = seeded ? p.d_out : p.kind === "explicit" ? p.W_query[0].length : inputDim();
  $("opt-dout").disabled = !seeded;
  $("opt-seed").value = seeded && p.seed !== null && p.seed !== undefined ? p.seed : "";
  $("opt-seed").disabled = !seeded;
  $("opt-heads").value = s.num_heads;
  $("opt-causal").checked = s.causal;
  const numeric = typeof s.scale === "number";
  $("opt-scale").value = numeric ? "number" : s.scale;
  $("opt-scale-number").value = numeric ? s.scale : "";
  $("opt-scale-number").disabled = !numeric;
  $("opt-mode").value = s.mode;
  renderUnknown($("unknown-words"), unknownWords(), 4, {
    onAdd: (word, vector) => {
      state.spec.embedding = { kind: "vocabulary", extra: { ...(e.extra || {}), [word]: vector } };
      update();
    },
    onHashed: () => {
      state.spec.embedding = { kind: "hashed", dim: inputDim() || 8, seed: 0 };
      update();
    },
  });
  for (const b of root.querySelectorAll(".preset")) {
    b.setAttribute("aria-pressed", String(b.dataset.testid === `preset-${state.preset}`));
  }
}

function renderTabs() {
  const tabs = $("head-tabs");
  const n = state.trace ? state.trace.num_heads : 1;
  const views = [...Array.from({ length: n }, (_, i) => String(i)), ...(n > 1 ? ["avg"] : [])];
  if (!views.includes(state.view)) state.view = "0";
  tabs.replaceChildren(
    ...views.map((v) =>
      el("button", {
        type: "button",
        role: "tab",
        "data-testid": `head-tab-${v}`,
        "aria-selected": String(v === state.view),
        text: v === "avg" ? "average of heads" : `head ${Number(v) + 1}`,
        onclick: async () => {
          state.view = v;
          renderTabs();
          save();
          delete root.dataset.ready;
          const seq = requestSeq;
          if ((await drawPipeline($("pipeline"), state.trace, state.view)) && seq === requestSeq) {
            root.dataset.ready = `${seq}-${v}`;
          }
        },
      }),
    ),
  );
}

async function renderGrids() {
  const box = $("grids");
  const { trace } = state;
  const W = trace && trace.x ? await currentMatrices().catch(() => null) : null;
  if (trace !== state.trace) return; // a newer trace is on its way
  // Same shapes and labels as the grids shown: write the changed numbers into the
  // inputs in place (rebuilding hundreds of inputs costs more than all the plots).
  const shape = JSON.stringify([trace.x && trace.x.map((r) => r.length), W && [W.W_query, W.W_key, W.W_value].map((m) => [m.length, m[0].length]), trace.tokens, state.spec.mode]);
  if (box.dataset.shape === shape && refreshGrids(box, [trace.x, ...(W ? [W.W_query, W.W_key, W.W_value] : [])])) return;
  box.dataset.shape = shape;
  box.replaceChildren();
  if (!trace || !trace.x) return;
  const rowLabels = tokenLabels(trace.tokens);
  box.append(
    matrixGrid({
      name: "x (embeddings)",
      testid: "grid-x",
      matrix: trace.x,
      rowLabels,
      colLabels: dimLabels(trace.x[0].length),
      onEdit: (i, j, v) => editCell("x", i, j, v),
    }),
  );
  if (state.spec.mode === "causal_average") {
    box.append(el("p", { class: "hint", text: "Causal averaging uses the embeddings as they are (W_value only)." }));
  }
  if (!W) return;
  const dIn = W.W_query.length;
  for (const name of ["W_query", "W_key", "W_value"]) {
    box.append(
      matrixGrid({
        name,
        testid: `grid-${name}`,
        matrix: W[name],
        rowLabels: dimLabels(dIn, "in"),
        colLabels: dimLabels(W[name][0].length, "out"),
        onEdit: (i, j, v) => editCell(name, i, j, v),
      }),
    );
  }
}

// ---------- changing the spec ----------

async function editCell(which, i, j, raw) {
  const value = Number(raw);
  const errorBox = root.querySelector('[data-error-for="grids"]');
  if (raw === "" || !Number.isFinite(value)) {
    errorBox.textContent = `${which} row ${i + 1}, column ${j + 1}: “${raw}” is not a number.`;
    return;
  }
  errorBox.textContent = "";
  // Seeds, hashes and the vocabulary become numbers first (POST /api/expand), then the
  // edit lands on those numbers and the spec is explicit from here on.
  const seq = requestSeq;
  let expanded;
  try {
    expanded = structuredClone(await expandedRequest());
  } catch (err) {
    showErrors(root, err, { ...ERROR_FIELDS, embedding: "grids", projection: "grids" });
    return;
  }
  if (seq !== requestSeq) return; // the spec changed while expanding: that edit is stale
  const s = normalize(expanded);
  if (which === "x") s.embedding.vectors[i][j] = value;
  else {
    if (s.projection.kind !== "explicit") {
      const d = s.embedding.vectors[0].length;
      s.projection = { kind: "explicit", W_query: identity(d), W_key: identity(d), W_value: identity(d) };
    }
    s.projection[which][i][j] = value;
  }
  state.spec = s;
  state.preset = null;
  await update();
}

function resizeExplicit(tokens) {
  // Explicit vectors follow the tokens: kept rows stay, new words get their toy vector or zeros.
  const s = state.spec;
  if (s.embedding.kind !== "explicit") return;
  const dim = inputDim();
  const old = new Map(s.tokens.map((t, i) => [t, s.embedding.vectors[i]]));
  s.embedding = {
    kind: "explicit",
    vectors: tokens.map((t) => old.get(t) || (VOCAB[t] && VOCAB[t].length === dim ? VOCAB[t].slice() : Array(dim).fill(0))),
  };
}

function setTokens(tokens) {
  resizeExplicit(tokens);
  state.spec.tokens = tokens;
  state.preset = null;
  update();
}

function addWord() {
  const input = $("token-input");
  const word = input.value.trim();
  if (!word) return;
  input.value = "";
  setTokens([...state.spec.tokens, word]);
}

function bindControls() {
  $("token-add").addEventListener("click", addWord);
  $("token-input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      addWord();
    }
  });
  const useSentence = () => {
    const words = splitSentence($("sentence-input").value);
    if (words.length) setTokens(words);
  };
  $("sentence-use").addEventListener("click", useSentence);
  $("sentence-input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      useSentence();
    }
  });
  const on = (id, fn) =>
    $(id).addEventListener("change", async (ev) => {
      await fn(ev.target);
      state.preset = null;
      update();
    });
  on("opt-embedding", (t) => {
    const dim = inputDim() || 4;
    const kinds = {
      vocabulary: { kind: "vocabulary", extra: {} },
      hashed: { kind: "hashed", dim, seed: 0 },
      seeded_random: { kind: "seeded_random", dim, seed: 1337, batch: 1, batch_index: 0 },
      explicit: { kind: "explicit", vectors: state.trace && state.trace.x ? clone(state.trace.x) : [] },
      model: { kind: "model", dim: modelDim(MAX_DIM) },
    };
    state.spec.embedding = kinds[t.value];
    if (t.value === "model") {
      delete state.spec.source_embedding; // sources get model vectors too
      const p = state.spec.projection;
      // Hand-set W matrices are as tall as the old vectors: keep their width, from nn.Linear's init.
      if (p.kind === "explicit") state.spec.projection = { kind: "seeded_linear", d_out: p.W_query[0].length, seed: 789 };
    }
  });
  on("opt-emb-dim", (t) => {
    const e = state.spec.embedding;
    e.dim = intOr(t.value, e.dim);
    if (isModel(e)) e.dim = Math.max(1, Math.min(e.dim, MODEL_WIDTH)); // narrowed, never widened
  });
  on("opt-emb-seed", (t) => (state.spec.embedding.seed = intOr(t.value, state.spec.embedding.seed)));
  on("opt-projection", async (t) => {
    const dIn = inputDim() || 4;
    const prev = state.spec.projection;
    const dOut = prev.d_out || (prev.W_query ? prev.W_query[0].length : Math.min(dIn, 3));
    if (t.value === "identity") state.spec.projection = { kind: "identity" };
    else if (t.value === "explicit") {
      // The matrices shown (seeded ones written out by the API), or a neutral start.
      const W = (await currentMatrices().catch(() => null)) || { W_query: eyeLike(dIn, dOut), W_key: eyeLike(dIn, dOut), W_value: eyeLike(dIn, dOut) };
      state.spec.projection = { kind: "explicit", W_query: clone(W.W_query), W_key: clone(W.W_key), W_value: clone(W.W_value) };
    } else state.spec.projection = { kind: t.value, d_out: dOut, seed: prev.seed === undefined ? 0 : prev.seed };
  });
  on("opt-dout", (t) => (state.spec.projection.d_out = intOr(t.value, state.spec.projection.d_out)));
  on("opt-seed", (t) => (state.spec.projection.seed = t.value === "" ? null : intOr(t.value, 0)));
  on("opt-heads", (t) => (state.spec.num_heads = intOr(t.value, 1)));
  on("opt-causal", (t) => (state.spec.causal = t.checked));
  on("opt-scale", (t) => (state.spec.scale = t.value === "number" ? Number($("opt-scale-number").value) || 1 : t.value));
  on("opt-scale-number", (t) => (state.spec.scale = Number(t.value)));
  on("opt-mode", (t) => {
    state.spec.mode = t.value;
    if (t.value === "causal_average") state.spec.causal = true;
  });
  $("download-trace").addEventListener("click", () => {
    if (state.trace) downloadJson("attention-trace.json", { request: state.request, response: state.trace });
  });
  $("copy-link").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(window.location.href);
      setStatus("Link copied.");
    } catch {
      setStatus("The link is in the address bar.");
    }
  });
}

function intOr(raw, fallback) {
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : fallback;
}

function setStatus(text) {
  $("status").textContent = text;
}

async function choosePreset(name) {
  clearErrors(root);
  const summary = init.presets.find((p) => p.name === name);
  if (!summary) {
    root.querySelector('[data-error-for="general"]').textContent = `There is no example named “${name}”.`;
    return;
  }
  state.preset = name;
  state.spec = normalize(structuredClone(summary.spec));
  state.view = "0";
  await update();
}

function save() {
  writeExplorerState({ preset: state.preset, spec: state.spec, view: state.view });
}

// ---------- computing ----------

const ERROR_FIELDS = {
  tokens: "tokens",
  source_tokens: "tokens",
  embedding: "options",
  source_embedding: "options",
  projection: "options",
  num_heads: "options",
  scale: "options",
  causal: "options",
  mode: "options",
};

async function update() {
  delete root.dataset.ready;
  save();
  renderControls();
  clearErrors(root);
  if (unknownWords().length) {
    root.querySelector('[data-error-for="tokens"]').textContent = "Add a vector for each new word, or switch to hashed embeddings.";
    return;
  }
  if (state.spec.tokens.length === 0) {
    root.querySelector('[data-error-for="tokens"]').textContent = "Add at least one token.";
    return;
  }
  const seq = ++requestSeq;
  setStatus("Computing…");
  try {
    const request = await resolve(state.spec);
    if (seq !== requestSeq) return;
    const trace = await api.attention(request);
    if (seq !== requestSeq) return;
    state.request = request;
    state.expanded = null;
    state.trace = trace;
    renderControls();
    renderTabs();
    const grids = renderGrids();
    const complete = (await Promise.all([drawPipeline($("pipeline"), trace, state.view), grids]))[0];
    if (!complete || seq !== requestSeq) return;
    setStatus("");
    root.dataset.ready = String(seq);
  } catch (err) {
    if (seq !== requestSeq) return;
    showErrors(root, err, ERROR_FIELDS);
    setStatus("");
  }
}

async function boot() {
  fillDatalist(document.getElementById("vocab-list"), Object.keys(VOCAB));
  bindControls();
  const fromUrl = readExplorerState();
  state.view = fromUrl.view;
  renderGallery();
  if (fromUrl.spec) {
    state.preset = fromUrl.preset;
    state.spec = normalize(fromUrl.spec);
    await update();
  } else {
    await choosePreset(fromUrl.preset || DEFAULT_PRESET);
  }
}

boot();
