// The explorer page: presets, tokens, options, editable numbers, the pipeline and the
// head view (what one token reads in every head).

import { ApiError, api } from "./api.js";
import { byTestId, copyPageLink, downloadJson, el, fillDatalist, initialData } from "./dom.js";
import { clearFieldErrors, markStale, showFieldError, showFieldErrors } from "./feedback.js";
import { clone, eyeLike, identity, matrixGrid, refreshGrids } from "./grid.js";
import { renderEmbeddingNotice, renderUnknownPieces } from "./explorer-notices.js";
import {
  errorPlace,
  localProblems,
  normalize,
  resizeExplicit,
  seededLike,
  specInputDim,
  unknownWords as unknownIn,
} from "./explorer-spec.js";
import { drawHeadView } from "./headview.js";
import { dimLabels, tokenLabels } from "./labels.js";
import { LIMITS, MODEL_VECTORS } from "./limits.js";
import { MODEL_WIDTH, modelDim, modelVectors, wordsWithUnknownPieces } from "./model-vectors.js";
import { STEPS, captionPipeline, drawPipeline } from "./pipeline.js";
import { URL_LIMIT, canonical, readExplorerState, writeExplorerState } from "./state.js";
import { bindTokenEditor, capTokens, renderChips, renderUnknown } from "./tokens.js";

const init = initialData();
const VOCAB = init.vocabulary || {};
const MAX_DIM = LIMITS.max_dim;
const DEFAULT_PRESET = "bank-raw";
// Hashed vectors when a sentence leaves the toy vocabulary and MiniLM is not installed.
const HASHED_DIM = 16;
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);

const state = {
  // The example the view started from: the URL stores only what differs from it.
  preset: null,
  spec: null,
  view: "0",
  trace: null,
  // What was posted for the trace shown: the spec with model embeddings as explicit vectors.
  request: null,
  // The same request with every number written out (POST /api/expand), when asked for.
  expanded: null,
  // The query token the head view shows (an index into the trace's tokens), or null.
  focus: null,
  headView: "lines",
  // Set when words outside the toy vocabulary made the page pick the vectors:
  // {kind: "model" | "hashed", words, before: {embedding, projection, source_embedding}, why}.
  auto: null,
  // The reader asked for the toy vocabulary with their own vectors: do not switch again.
  ownVectors: false,
  // What capping the tokens cut, per editor, in plain words.
  notes: { tokens: [], source_tokens: [] },
  // The specs before each number edit (oldest first), for Undo and Reset.
  edits: [],
};
let requestSeq = 0;

const unknownWords = (spec = state.spec) => unknownIn(spec, VOCAB);

function presetSpec(name) {
  const summary = init.presets.find((p) => p.name === name);
  return summary ? normalize(structuredClone(summary.spec)) : null;
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
  return specInputDim(state.spec);
}

// ---------- choosing vectors for words outside the toy vocabulary ----------

/** Words outside the toy vocabulary: give every word the best vectors there are. */
function adaptEmbedding() {
  if (state.ownVectors || state.spec.embedding.kind !== "vocabulary") return;
  const words = unknownWords();
  if (!words.length) return;
  switchEmbedding(MODEL_VECTORS ? "model" : "hashed", words, MODEL_VECTORS ? null : "this server has no MiniLM checkpoint");
}

function switchEmbedding(kind, words, why) {
  const s = state.spec;
  const before = state.auto ? state.auto.before : { embedding: s.embedding, projection: s.projection, source_embedding: s.source_embedding };
  const dim = kind === "model" ? modelDim(MAX_DIM) : Math.max(specInputDim(s), HASHED_DIM);
  s.embedding = kind === "model" ? { kind: "model", dim } : { kind: "hashed", dim, seed: 0 };
  delete s.source_embedding; // sources get the same kind of vectors
  // Hand-set W matrices are as tall as the old vectors: keep their width, from nn.Linear's init.
  if (s.projection.kind === "explicit" && s.projection.W_query.length !== dim) {
    s.projection = seededLike(s.projection);
  }
  state.auto = { kind, words, before, why };
}

function useOwnVectors() {
  const { before } = state.auto;
  state.spec.embedding = before.embedding.kind === "vocabulary" ? before.embedding : { kind: "vocabulary", extra: {} };
  state.spec.projection = before.projection;
  if (before.source_embedding) state.spec.source_embedding = before.source_embedding;
  state.auto = null;
  state.ownVectors = true;
  update();
}

function renderNotices() {
  renderEmbeddingNotice($("embedding-notice"), state.auto, state.spec.embedding.kind, {
    onHashed: () => {
      switchEmbedding("hashed", state.auto.words, null);
      update();
    },
    onOwn: useOwnVectors,
    dim: state.spec.embedding.dim,
  });
  const s = state.spec;
  const unk = isModel(s.embedding) ? wordsWithUnknownPieces([...s.tokens, ...(s.source_tokens || [])]) : [];
  renderUnknownPieces($("unk-note"), unk);
  return new Set(unk);
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
          "aria-pressed": "false",
          onclick: () => choosePreset(p.name),
        }, [el("strong", { text: p.title }), el("span", { text: p.description }), el("small", { text: p.source })]),
      ]),
    ),
  );
}

/** The example is shown as chosen while the view is exactly that example. */
function currentPreset() {
  const base = state.preset && presetSpec(state.preset);
  return base && canonical(base) === canonical(state.spec) ? state.preset : null;
}

function renderNotes(key, testid) {
  $(testid).textContent = state.notes[key].join(" ");
}

const UNKNOWN_MARK = "MiniLM does not know this word: [UNK]";
const unknownMarks = (tokens, unk) => tokens.map((t) => (unk.has(t) ? UNKNOWN_MARK : ""));

function renderControls() {
  const unk = renderNotices();
  renderTokenControls(unk);
  renderCrossControls(unk);
  renderEmbeddingControls();
  renderProjectionControls();
  renderOptionControls();
  renderUnknownWords();
  renderEditHistory();
  const chosen = currentPreset();
  for (const b of root.querySelectorAll(".preset")) {
    b.setAttribute("aria-pressed", String(b.dataset.testid === `preset-${chosen}`));
  }
}

/** The token chips (words MiniLM does not know marked) and what capping them cut. */
function renderTokenControls(unk) {
  const s = state.spec;
  renderChips($("token-chips"), s.tokens, (i) => setTokens(s.tokens.filter((_, j) => j !== i)), {
    onChoose: (i) => chooseToken(i),
    chosen: state.focus,
    marks: unknownMarks(s.tokens, unk),
  });
  renderNotes("tokens", "tokens-note");
}

/** Cross-attention on or off: the source editor and its chips, the title, the causal mask's place. */
function renderCrossControls(unk) {
  const s = state.spec;
  const cross = Boolean(s.source_tokens);
  $("opt-cross").checked = cross;
  $("source-editor").hidden = !cross;
  $("explorer-title").textContent = cross ? "Cross-attention, step by step" : "Self-attention, step by step";
  $("opt-causal").disabled = cross;
  $("causal-help").hidden = !cross;
  captionPipeline($("pipeline"), cross);
  if (!cross) return;
  renderChips($("source-chips"), s.source_tokens, (i) => setTokens(s.source_tokens.filter((_, j) => j !== i), "source_tokens"), {
    what: "source token",
    marks: unknownMarks(s.source_tokens, unk),
  });
  renderNotes("source_tokens", "source-note");
}

/** The embedding's kind, width and seed, and what MiniLM's vectors are when chosen. */
function renderEmbeddingControls() {
  const e = state.spec.embedding;
  $("opt-embedding").value = e.kind;
  $("opt-emb-dim").value = e.dim ?? inputDim() ?? "";
  $("opt-emb-dim").disabled = !("dim" in e);
  $("opt-emb-dim").max = String(isModel(e) ? modelDim(MAX_DIM) : MAX_DIM);
  const note = $("model-note");
  note.hidden = !isModel(e);
  if (isModel(e)) note.textContent = modelNote(e.dim);
  $("opt-emb-seed").value = e.seed ?? "";
  $("opt-emb-seed").disabled = !("seed" in e);
}

function modelNote(dim) {
  return dim < MODEL_WIDTH
    ? `MiniLM's word vectors (its embedding table: one fixed vector per word, no context) are 384 numbers wide; ` +
        `this server takes at most ${MAX_DIM} (ATTENTION_VIZ_MAX_DIM), so each is multiplied by one fixed random ` +
        `384 × ${dim} matrix, which keeps lengths and angles roughly. Any word works.`
    : "MiniLM's word vectors, all 384 numbers: its embedding table, one fixed vector per word, no context. Any word works.";
}

/** The projection's kind, output width and seed (the last two only for seeded ones). */
function renderProjectionControls() {
  const p = state.spec.projection;
  $("opt-projection").value = p.kind;
  const seeded = p.kind === "seeded_rand" || p.kind === "seeded_linear";
  $("opt-dout").value = seeded ? p.d_out : p.kind === "explicit" ? p.W_query[0].length : inputDim();
  $("opt-dout").disabled = !seeded;
  $("opt-dout").max = String(MAX_DIM);
  $("opt-seed").value = seeded && p.seed !== null && p.seed !== undefined ? p.seed : "";
  $("opt-seed").disabled = !seeded;
}

/** Heads, the causal mask, the scale and the mode. */
function renderOptionControls() {
  const s = state.spec;
  $("opt-heads").value = s.num_heads;
  $("opt-heads").max = String(LIMITS.max_heads);
  $("opt-causal").checked = s.causal && !s.source_tokens;
  const numeric = typeof s.scale === "number";
  $("opt-scale").value = numeric ? "number" : s.scale;
  $("opt-scale-number").value = numeric ? s.scale : "";
  $("opt-scale-number").disabled = !numeric;
  $("opt-mode").value = s.mode;
}

/** Words without a vector: a vector to type for each, or hashed vectors for all. */
function renderUnknownWords() {
  renderUnknown($("unknown-words"), unknownWords(), specInputDim(state.spec), {
    onAdd: (word, vector) => {
      state.spec.embedding = { kind: "vocabulary", extra: { ...(state.spec.embedding.extra || {}), [word]: vector } };
      update();
    },
    onHashed: () => {
      state.spec.embedding = { kind: "hashed", dim: inputDim() || 8, seed: 0 };
      update();
    },
  });
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

// ---------- the head view ----------

function drawHeads() {
  const panel = $("headview-panel");
  const { trace } = state;
  if (!trace || state.focus === null || !panel.open) return;
  const weights = trace.heads.map((h) => h.attn_weights);
  if (weights.some((w) => !w)) return;
  const query = Math.min(state.focus, trace.tokens.length - 1);
  drawHeadView(
    $("headview"),
    {
      queries: tokenLabels(trace.tokens),
      keys: tokenLabels(trace.source_tokens),
      query,
      rows: weights.map((w) => w[query]),
    },
    {
      mode: state.headView,
      onSelect: (i) => chooseToken(i, { scroll: false }),
      onMode: (mode) => {
        state.headView = mode;
        save();
      },
    },
  );
}

/** Show what token i (a query: a row of the weights) reads, in every head. */
function chooseToken(i, { scroll = true } = {}) {
  if (!state.trace || !Number.isInteger(i) || i < 0 || i >= state.trace.tokens.length) return;
  state.focus = i;
  const panel = $("headview-panel");
  const wasOpen = panel.open;
  panel.open = true;
  save();
  // Pressed state only: rebuilding the chips would take the focus from the one clicked.
  $("token-chips")
    .querySelectorAll("[data-testid='token-chip-choose']")
    .forEach((b, k) => b.setAttribute("aria-pressed", String(k === i)));
  if (wasOpen) drawHeads(); // else the toggle event draws it
  if (scroll) {
    const box = panel.getBoundingClientRect();
    if (box.top < 0 || box.top > window.innerHeight - 120) panel.scrollIntoView({ block: "start", behavior: "instant" });
  }
}

const QUERY_ROWS = new Set(STEPS.filter((s) => s.rows === "q").map((s) => s.key));

/** A click on a row label or a cell of a map whose rows are the query tokens chooses that token. */
function bindPlotClicks() {
  for (const key of QUERY_ROWS) {
    const div = $("pipeline").querySelector(`[data-step="${key}"] .plot`);
    if (!div || div.dataset.tokenClicks || typeof div.on !== "function") continue;
    div.dataset.tokenClicks = "1";
    div.on("plotly_click", (ev) => {
      const point = ev && ev.points && ev.points[0];
      if (!point) return;
      const row = Array.isArray(point.pointIndex) ? point.pointIndex[0] : Number(point.y);
      chooseToken(row);
    });
  }
}

/**
 * A click on a row label (Plotly's or the quick renderer's .ytick) or on a cell of a map
 * drawn before Plotly took over (the quick renderer's canvas, row 0 at the top) chooses
 * that row's token. Every row up to 64 has its label, in order.
 */
function onRowLabelClick(ev) {
  const target = ev.target instanceof Element ? ev.target : null;
  const panel = target && target.closest("[data-step]");
  if (!panel || !QUERY_ROWS.has(panel.dataset.step)) return;
  const tick = target.closest(".ytick");
  if (tick) {
    const value = tick.__data__ && Number.isFinite(tick.__data__.x) ? tick.__data__.x : [...tick.parentNode.children].indexOf(tick);
    chooseToken(Math.round(value));
    return;
  }
  const cells = target.closest(".quick-cells");
  const rows = state.trace ? state.trace.tokens.length : 0;
  if (cells && rows) {
    const box = cells.getBoundingClientRect();
    chooseToken(Math.min(rows - 1, Math.floor(((ev.clientY - box.top) / box.height) * rows)));
  }
}

// ---------- changing the spec ----------

async function editCell(which, i, j, raw) {
  const value = Number(raw);
  clearFieldErrors($("grids").parentElement);
  if (raw === "" || !Number.isFinite(value)) {
    showFieldError(root, "grids", `${which} row ${i + 1}, column ${j + 1}: “${raw}” is not a number.`);
    return;
  }
  if (Math.abs(value) > LIMITS.max_abs_value) {
    showFieldError(root, "grids", `${which} row ${i + 1}, column ${j + 1}: ${value} is too large; numbers must lie between −1,000,000 and 1,000,000.`);
    return;
  }
  // Seeds, hashes and the vocabulary become numbers first (POST /api/expand), then the
  // edit lands on those numbers and the spec is explicit from here on.
  const seq = requestSeq;
  let expanded;
  try {
    expanded = structuredClone(await expandedRequest());
  } catch (err) {
    showErrors(err);
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
  state.edits.push({ spec: structuredClone(state.spec), auto: state.auto });
  state.spec = s;
  state.auto = null;
  await update();
}

/** Back to the spec before the last number edit (Undo) or before the first (Reset). */
async function takeBackEdits(all) {
  if (!state.edits.length) return;
  const before = all ? state.edits[0] : state.edits[state.edits.length - 1];
  state.edits = all ? [] : state.edits.slice(0, -1);
  state.spec = structuredClone(before.spec);
  state.auto = before.auto;
  clearFieldErrors(root);
  await update();
}

function renderEditHistory() {
  const n = state.edits.length;
  $("grid-undo").disabled = n === 0;
  $("grid-reset").disabled = n === 0;
  $("grid-history").textContent = n === 0 ? "" : `${n} number${n === 1 ? "" : "s"} changed`;
}

/** New tokens (or source tokens), capped at the server's limits, then recomputed. */
function setTokens(words, which = "tokens") {
  const { tokens, notes } = capTokens(words, { maxTokens: LIMITS.max_tokens, maxChars: LIMITS.max_token_chars });
  state.notes[which] = notes;
  const s = state.spec;
  if (which === "tokens") {
    s.embedding = resizeExplicit(s.embedding, s.tokens, tokens, VOCAB);
    s.tokens = tokens;
  } else {
    if (s.source_embedding) s.source_embedding = resizeExplicit(s.source_embedding, s.source_tokens || [], tokens, VOCAB);
    s.source_tokens = tokens;
  }
  if (state.focus !== null && state.focus >= s.tokens.length) state.focus = null;
  adaptEmbedding();
  update();
}

function leaveCrossAttention() {
  delete state.spec.source_tokens;
  delete state.spec.source_embedding;
  state.notes.source_tokens = [];
}

/** Add one word (whole, as typed) unless the sequence is full. */
function addWord(word, which) {
  const current = which === "tokens" ? state.spec.tokens : state.spec.source_tokens || [];
  if (current.length >= LIMITS.max_tokens) {
    state.notes[which] = [`This server takes at most ${LIMITS.max_tokens} tokens per sequence (ATTENTION_VIZ_MAX_TOKENS): remove one first.`];
    renderNotes(which, which === "tokens" ? "tokens-note" : "source-note");
    return false;
  }
  setTokens([...current, word], which);
  return true;
}

function bindControls() {
  bindTokenEditors();
  bindEmbeddingOptions();
  bindProjectionOptions();
  bindSpecOptions();
  $("grid-undo").addEventListener("click", () => takeBackEdits(false));
  $("grid-reset").addEventListener("click", () => takeBackEdits(true));
  $("download-trace").addEventListener("click", () => {
    if (state.trace) downloadJson("attention-trace.json", { request: state.request, response: state.trace });
  });
  $("copy-link").addEventListener("click", () => copyPageLink(setStatus));
  $("pipeline").addEventListener("click", onRowLabelClick);
  $("headview-panel").addEventListener("toggle", () => {
    if ($("headview-panel").open && state.focus === null && state.trace) state.focus = 0;
    save();
    drawHeads();
  });
}

/** The word and sentence editors of the tokens and of the source tokens. */
function bindTokenEditors() {
  for (const [ids, which] of [
    [["token-input", "token-add", "sentence-input", "sentence-use", "sentence-count"], "tokens"],
    [["source-input", "source-add", "source-sentence", "source-use", "source-sentence-count"], "source_tokens"],
  ]) {
    const [input, add, sentence, use, count] = ids.map($);
    bindTokenEditor({ input, add, sentence, use, count }, {
      maxTokens: LIMITS.max_tokens,
      onWord: (word) => addWord(word, which),
      onSentence: (words) => {
        // An own sentence starts self-attention: the old example's source does not belong to it.
        if (which === "tokens") leaveCrossAttention();
        setTokens(words, which);
      },
    });
  }
}

/** A change of the control `id` runs fn(the control), then recomputes the view. */
function onChange(id, fn) {
  $(id).addEventListener("change", async (ev) => {
    await fn(ev.target);
    update();
  });
}

function bindEmbeddingOptions() {
  onChange("opt-embedding", (t) => chooseEmbedding(t.value));
  onChange("opt-emb-dim", (t) => {
    const e = state.spec.embedding;
    e.dim = intOr(t.value, e.dim);
    if (isModel(e)) e.dim = Math.max(1, Math.min(e.dim, MODEL_WIDTH)); // narrowed, never widened
  });
  onChange("opt-emb-seed", (t) => (state.spec.embedding.seed = intOr(t.value, state.spec.embedding.seed)));
}

/** The reader picked an embedding kind: its default settings, and (MiniLM) a projection that fits. */
function chooseEmbedding(kind) {
  const dim = inputDim() || 4;
  const kinds = {
    vocabulary: { kind: "vocabulary", extra: {} },
    hashed: { kind: "hashed", dim, seed: 0 },
    seeded_random: { kind: "seeded_random", dim, seed: 1337, batch: 1, batch_index: 0 },
    explicit: { kind: "explicit", vectors: state.trace && state.trace.x ? clone(state.trace.x) : [] },
    model: { kind: "model", dim: modelDim(MAX_DIM) },
  };
  state.spec.embedding = kinds[kind];
  state.auto = null;
  state.ownVectors = kind === "vocabulary";
  if (kind === "model") {
    delete state.spec.source_embedding; // sources get model vectors too
    const p = state.spec.projection;
    // Hand-set W matrices are as tall as the old vectors: keep their width, from nn.Linear's init.
    if (p.kind === "explicit") state.spec.projection = seededLike(p);
  }
}

function bindProjectionOptions() {
  onChange("opt-projection", (t) => chooseProjection(t.value));
  onChange("opt-dout", (t) => (state.spec.projection.d_out = intOr(t.value, state.spec.projection.d_out)));
  onChange("opt-seed", (t) => (state.spec.projection.seed = t.value === "" ? null : intOr(t.value, 0)));
}

/** The reader picked a projection kind; explicit starts from the matrices shown (or identities). */
async function chooseProjection(kind) {
  const dIn = inputDim() || 4;
  const prev = state.spec.projection;
  const dOut = prev.d_out || (prev.W_query ? prev.W_query[0].length : Math.min(dIn, 3));
  if (kind === "identity") state.spec.projection = { kind: "identity" };
  else if (kind === "explicit") {
    // The matrices shown (seeded ones written out by the API), or a neutral start.
    const W = (await currentMatrices().catch(() => null)) || { W_query: eyeLike(dIn, dOut), W_key: eyeLike(dIn, dOut), W_value: eyeLike(dIn, dOut) };
    state.spec.projection = { kind: "explicit", W_query: clone(W.W_query), W_key: clone(W.W_key), W_value: clone(W.W_value) };
  } else state.spec.projection = { kind, d_out: dOut, seed: prev.seed === undefined ? 0 : prev.seed };
}

/** Heads, the causal mask, cross-attention, the scale and the mode. */
function bindSpecOptions() {
  onChange("opt-heads", (t) => (state.spec.num_heads = intOr(t.value, NaN)));
  onChange("opt-causal", (t) => (state.spec.causal = t.checked));
  onChange("opt-cross", (t) => setCrossAttention(t.checked));
  onChange("opt-scale", (t) => (state.spec.scale = t.value === "number" ? Number($("opt-scale-number").value) || 1 : t.value));
  onChange("opt-scale-number", (t) => (state.spec.scale = t.value === "" ? NaN : Number(t.value)));
  onChange("opt-mode", (t) => {
    state.spec.mode = t.value;
    if (t.value === "causal_average") state.spec.causal = true;
  });
}

/** Cross-attention on: the tokens attend to a copy of themselves as the source, unmasked. */
function setCrossAttention(on) {
  if (on) {
    state.spec.source_tokens = state.spec.tokens.slice();
    state.spec.causal = false; // a mask is for a token's own sequence
    if (state.spec.mode === "causal_average") state.spec.mode = "attention";
  } else {
    delete state.spec.source_tokens;
    delete state.spec.source_embedding;
  }
  adaptEmbedding();
}

function intOr(raw, fallback) {
  const n = Number(raw);
  return raw !== "" && Number.isFinite(n) ? n : fallback;
}

function setStatus(text) {
  $("status").textContent = text;
}

async function choosePreset(name) {
  clearFieldErrors(root);
  const spec = presetSpec(name);
  if (!spec) {
    showFieldError(root, "general", `There is no example named “${name}”.`);
    return;
  }
  state.preset = name;
  state.spec = spec;
  state.view = "0";
  state.focus = null;
  state.auto = null;
  state.ownVectors = false;
  state.notes = { tokens: [], source_tokens: [] };
  state.edits = [];
  await update();
}

function save() {
  const base = state.preset ? presetSpec(state.preset) : null;
  const panelOpen = $("headview-panel").open;
  const length = writeExplorerState(
    { preset: state.preset, spec: state.spec, view: state.view, focus: panelOpen ? state.focus : null, headView: state.headView },
    base,
  );
  const note = $("url-note");
  note.hidden = length <= URL_LIMIT;
  note.textContent = note.hidden
    ? ""
    : `This view is too large for a link (${length.toLocaleString("en-US")} characters; links stay under ${URL_LIMIT.toLocaleString("en-US")}), ` +
      "so the address keeps only the example it started from. “Download trace JSON” keeps every number.";
}

// ---------- errors: beside their control, in plain words ----------

function showErrors(err) {
  const shown = showFieldErrors(root, err, (path) => errorPlace(path, state.spec), { maxHeads: LIMITS.max_heads });
  staleBecause(shown.join(" "));
}

function staleBecause(reason) {
  markStale($("pipeline"), $("stale-note"), reason);
  const hv = $("headview");
  if (reason === null) delete hv.dataset.stale;
  else hv.dataset.stale = "true";
}

// ---------- computing ----------

async function update() {
  delete root.dataset.ready;
  if (state.spec.source_tokens) state.spec.causal = false; // no causal mask across sequences (causal-help)
  save();
  renderControls();
  clearFieldErrors(root);
  const seq = ++requestSeq;
  if (showSpecProblems()) {
    setStatus("");
    return;
  }
  setStatus("Computing…");
  try {
    const request = await requestFor(state.spec);
    if (request === null) return update();
    if (seq !== requestSeq) return;
    const trace = await api.attention(request);
    if (seq !== requestSeq) return;
    const complete = await showTrace(request, trace);
    if (!complete || seq !== requestSeq) return;
    bindPlotClicks();
    setStatus("");
    root.dataset.ready = String(seq);
  } catch (err) {
    if (seq !== requestSeq) return;
    showErrors(err);
    setStatus("");
  }
}

/** Words without vectors, or numbers the server would refuse: said beside their controls (true), before any request. */
function showSpecProblems() {
  if (unknownWords().length) {
    showFieldError(root, "tokens", "Add a vector for each new word, or switch to hashed embeddings.");
    staleBecause("Some words have no vector yet.");
    return true;
  }
  const problems = localProblems(state.spec);
  if (!problems.length) return false;
  for (const [key, text] of problems) showFieldError(root, key, text);
  staleBecause(problems.map(([, text]) => text).join(" "));
  return true;
}

/** The request for a spec; null when MiniLM, chosen for the reader, could not give its vectors (the page switched to hashed ones). */
async function requestFor(spec) {
  try {
    return await resolve(spec);
  } catch (err) {
    if (!(err instanceof ApiError) || !state.auto || state.auto.kind !== "model") throw err;
    switchEmbedding("hashed", state.auto.words, "MiniLM's vectors are not available on this server");
    return null;
  }
}

/** A new trace on the page: controls, tabs, grids, head view and pipeline; whether the pipeline was drawn to the end. */
async function showTrace(request, trace) {
  state.request = request;
  state.expanded = null;
  state.trace = trace;
  staleBecause(null);
  renderControls();
  renderTabs();
  const grids = renderGrids();
  drawHeads();
  return (await Promise.all([drawPipeline($("pipeline"), trace, state.view), grids]))[0];
}

async function boot() {
  fillDatalist(document.getElementById("vocab-list"), Object.keys(VOCAB));
  bindControls();
  const fromUrl = readExplorerState();
  state.view = fromUrl.view;
  state.headView = fromUrl.headView;
  renderGallery();
  const { overrides } = fromUrl;
  const known = fromUrl.preset && presetSpec(fromUrl.preset);
  // A URL names the example it started from and what differs; no example and no
  // tokens: the default example, with whatever else the URL sets.
  state.preset = known ? fromUrl.preset : overrides.tokens ? null : DEFAULT_PRESET;
  const spec = { ...(state.preset ? presetSpec(state.preset) : {}), ...overrides };
  if (spec.source_tokens === null) delete spec.source_tokens;
  if (spec.source_embedding === null) delete spec.source_embedding;
  state.spec = normalize(spec);
  const { tokens, notes } = capTokens(state.spec.tokens, { maxTokens: LIMITS.max_tokens, maxChars: LIMITS.max_token_chars });
  state.spec.tokens = tokens;
  state.notes.tokens = notes;
  if (!("embedding" in overrides)) adaptEmbedding(); // a hand-made link with any words
  if (fromUrl.focus !== null) {
    state.focus = fromUrl.focus;
    $("headview-panel").open = true;
  }
  await update();
  if (fromUrl.preset && !known) showFieldError(root, "general", `There is no example named “${fromUrl.preset}”.`);
}

// ?real=<model>&text=…&layer=…&head=…: one head of a real model instead of a toy spec.
if (new URLSearchParams(window.location.search).has("real")) import("./explorer-real.js").then((m) => m.bootRealHead(root));
else boot();
