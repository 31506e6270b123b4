// The real-model page: any model the server has (a picker), its attention for every
// layer and head (compact uint8 per layer, drawn on canvas), one map large, head
// averages and rollout, a decoder's generation, one token's weights in every head,
// a link from any head to its steps in the explorer, and (encoders) one word's
// cosine across two texts, layer by layer.

import { showErrors as showCompareErrors, clearErrors as clearCompareErrors } from "./api.js";
import { byTestId, el, initialData } from "./dom.js";
import { clearFieldErrors, markStale, showFieldError, showFieldErrors } from "./feedback.js";
import { countOf, tokenLabels } from "./labels.js";
import { mountExport } from "./model-export.js";
import { drawMap, mapMax } from "./model-canvas.js";
import { fetchLayers, generateLayers, mapView, modelApi } from "./model-data.js";
import { generationProblems, modelErrorPlace, plainModelError } from "./model-errors.js";
import { drawCosines, drawZoom } from "./model-plots.js";
import { progressBar } from "./model-progress.js";
import { canvasZoom, cropMap, drawCells, fetchMap, isPooled, layerFilter, rangeTop } from "./model-overview.js";
import { buildHeadGrid, gridColumns, gridKey, mapName, thumbAtlas, usesAtlas } from "./model-grid.js";
import { ENCODER_DECODER, initStacks } from "./model-stacks.js";
import { EXTRA_MAPS, URL_LIMIT, defaultState, readModelState, realHeadLink, writeModelState } from "./model-state.js";
import { setupAttribution } from "./model-attribution.js";
import { setupHeadAnalysis } from "./model-heads.js";
import { setupWhy } from "./model-why.js";
import { drawTokenView, rowFor, rowsOfLayers } from "./model-token-view.js";
import { tokenRows } from "./model-token-rows.js";
import { explainUnknown, markChosenToken, renderGenerationSummary, renderTokenList } from "./model-tokens.js";
import { adds, markTokens, mountTokenSelection, toggled } from "./model-multi-token.js";
import { mountTwoTexts } from "./model-two-texts.js";

const init = initialData();
const LIMITS = init.limits || {};
const MODELS = (init.models && init.models.models) || [];
const DEFAULT_MODEL = init.models ? init.models.default : null;
const DEFAULTS = defaultState(init);
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);
const form = $("model-form");
const cwForm = $("compare-word-form");
const grid = $("head-grid");
const results = $("model-results");
const tokenView = $("token-view");

/** The page's defaults for a model: a trained run opens with its own probe text. */
function defaultsFor(entry) {
  if (!entry || !entry.probe) return DEFAULTS;
  return { ...DEFAULTS, text: entry.probe, prompt: entry.probe };
}
const urlModel = new URLSearchParams(window.location.search).get("model");
const state = readModelState(defaultsFor(MODELS.find((m) => m.name === urlModel && m.supported)));
// Encoder-decoders: the three stacks and the alignment view (model-stacks.js).
const stacks = initStacks({ models: MODELS, defaultModel: DEFAULT_MODEL, limits: LIMITS, form, sourceText: () => $("model-text").value, modelName: () => state.model });

let info = null; // GET /api/model?model=… of the maps shown
let meta = null; // the answer shown, without its maps: tokens, positions, generated…
let layers = new Map(); // layer number -> {heads, average, rollout}
let shown = null; // what the maps shown were computed from (for the step-by-step link)
let buttons = new Map(); // "L-head" -> button
let selected = null; // the pressed button (only it and the next one change: hundreds of heads)
let seq = 0;
let headViewMode = "lines";
let modelNote = null; // a problem with the URL's model, shown beside the picker
// Long texts, many heads (model-overview.js): the grid's maps pooled, the large map on canvas.
let overview = false; // the grid holds pooled maps (the large map is fetched)
let mapRequest = null; // the text and options the maps shown came from
let rowSource = null; // pooled maps: one token's rows, asked for and kept (model-token-rows.js)
// The longest text whose every full map a request may still need (head scores, ablation,
// the logit lens): 512 tokens, what any input had before the long path.
const ANALYSIS_TOKENS = 512;
const overviewNote = el("p", { class: "hint", "data-testid": "overview-note", hidden: true });
grid.before(overviewNote);
const zoomCanvas = canvasZoom($("zoom-plot"), $("zoom-readout"));
$("zoom-plot").after(zoomCanvas.element);
mountExport($("zoom-readout"), {
  request: () => mapRequest,
  zoom: {
    canvas: () => (zoomCanvas.element.hidden ? null : zoomCanvas.element.querySelector("canvas")),
    plot: () => $("zoom-plot"),
    title: () => $("zoom-title").textContent,
    bar: () => zoomCanvas.element.querySelector("[data-testid='zoom-colour-bar']"),
  },
});
const filter = layerFilter(grid, () => {
  if (atlas) atlas.layout();
  if (!filter.shows(state.layer)) {
    const first = [...buttons.values()].find((b) => !b.hidden);
    if (first) select(Number(first.dataset.layer), first.dataset.head);
  }
});
// Head scores, ablation and the logit lens (model-heads.js); a head there opens its map here.
function openHead(layer, head) {
  select(layer, String(head));
  $("zoom-card").scrollIntoView({ block: "nearest" });
}
const analysis = setupHeadAnalysis({ container: $("head-analysis"), openHead });
// Which heads matter in one pass (model-attribution.js); why a clicked cell (model-why.js).
const attribution = setupAttribution({ card: $("attribution"), openHead });
let explained = null; // {model, text, causal, tokens} of the maps whose cells are explained
const whyCell = setupWhy({
  card: $("why-cell"),
  zoom: $("zoom-plot"),
  context: () => (explained && /^\d+$/.test(state.head) ? { ...explained, layer: state.layer, head: Number(state.head) } : null),
});

// ---------- models ----------

const isPlainEncoder = (entry) => Boolean(entry && !entry.causal && entry.kind !== ENCODER_DECODER);
const entryOf = (name) => MODELS.find((m) => m.name === (name || DEFAULT_MODEL)) || null;
const current = () => entryOf(state.model);

/** The URL's model when it can be shown; else the default, and a note for the picker. */
function checkUrlModel() {
  if (!state.model) return;
  const asked = state.model;
  const entry = MODELS.find((m) => m.name === asked);
  if (entry && entry.supported) {
    if (asked === DEFAULT_MODEL) state.model = null;
    return;
  }
  state.model = null;
  modelNote = entry
    ? `“${asked}” cannot be shown: ${entry.reason}. Showing ${DEFAULT_MODEL} instead.`
    : `There is no model called “${asked}” on this server; showing ${DEFAULT_MODEL} instead. Choose one from the list.`;
}

/** A model without attention layers (a trained bigram): nothing to map, but it writes. */
const hasNoLayers = (entry) => Boolean(entry && entry.layers === 0);

/** Say why a model without layers shows no maps (and hide the empty map cards). */
function explainNoAttention(entry) {
  const none = hasNoLayers(entry);
  const note = $("no-attention");
  note.hidden = !none;
  note.textContent = none
    ? `${entry.name} has no attention layers (0 layers, as a trained bigram: no token reads another), so there is no attention to show. It still writes text after a prompt.`
    : "";
  $("model-layout").hidden = none;
  tokenView.hidden = none;
  $("tokens-help").hidden = none; // "choose a token to see what it reads": nothing to read
  form.querySelector("input[name='task'][value='read']").disabled = none;
}

/** Show the controls the chosen model takes (a pair for encoders, generation for decoders). */
function applyKind() {
  const entry = current();
  const causal = Boolean(entry && entry.causal);
  const pairs = isPlainEncoder(entry); // an encoder-decoder's second text is its target (model-stacks.js)
  if (!causal) state.task = "read";
  if (hasNoLayers(entry)) state.task = "generate";
  explainNoAttention(entry);
  const generating = state.task === "generate";
  $("task").hidden = !causal;
  for (const radio of form.querySelectorAll("input[name='task']")) radio.checked = radio.value === state.task;
  $("text-field").hidden = generating;
  $("text-b-field").hidden = !pairs;
  $("generate-fields").hidden = !generating;
  $("model-run").textContent = generating ? "Generate" : "Show attention";
  $("masked-hint").hidden = !causal;
  $("compare-word-card").hidden = !pairs;
  // Value-weighted maps are a one-stack model's (an encoder-decoder answers 422 for them).
  const seq2seq = Boolean(entry && entry.kind === ENCODER_DECODER);
  if (seq2seq) state.measure = "weights";
  $("map-measure").value = state.measure;
  $("map-measure").disabled = seq2seq;
  $("two-texts").hidden = seq2seq; // its one head's map is a one-stack model's (the stacks card is this one's)
  $("tokens-kind").textContent = entry && entry.family === "bert" ? "WordPiece tokens" : "Tokens";
  if (entry) {
    $("model-pick").value = entry.name;
    $("model-name").textContent = entry.name;
    $("model-facts").textContent = entry.about;
    $("gen-max-help").textContent = newTokensHelp(entry);
  }
  const sampled = state.sampling === "sample";
  for (const id of ["gen-temperature", "gen-top-k", "gen-seed"]) $(id).disabled = !sampled;
}

/** What bounds Max new tokens for this model: the server's limit, or the model's context. */
function newTokensHelp(entry) {
  const server = LIMITS.max_new_tokens;
  const room = entry.max_positions ? entry.max_positions - 1 : null; // a prompt is at least 1 token
  if (room !== null && (!server || room < server)) {
    return `at most ${room.toLocaleString("en")}: this model reads ${countOf(entry.max_positions, "token")}, prompt included`;
  }
  return `at most ${server.toLocaleString("en")} on this server`;
}

// ---------- the form <-> state ----------

const numberOrNull = (raw) => (raw.trim() === "" ? null : Number(raw));

function readForm() {
  state.text = $("model-text").value;
  state.textB = $("model-text-b").value.trim() ? $("model-text-b").value : "";
  state.prompt = $("gen-prompt").value;
  state.maxNew = numberOrNull($("gen-max").value);
  state.sampling = $("gen-sampling").value;
  state.temperature = numberOrNull($("gen-temperature").value);
  state.topK = numberOrNull($("gen-top-k").value);
  state.seed = numberOrNull($("gen-seed").value);
}

function fillForm() {
  $("model-text").value = state.text;
  $("model-text-b").value = state.textB;
  $("gen-prompt").value = state.prompt;
  $("gen-max").value = state.maxNew ?? "";
  $("gen-sampling").value = state.sampling;
  $("gen-temperature").value = state.temperature ?? "";
  $("gen-top-k").value = state.topK ?? "";
  $("gen-seed").value = state.seed ?? "";
  $("hide-special").checked = state.hide;
  $("colour-scale").value = state.scale;
  $("sink-apart").checked = state.sinkApart;
  $("map-measure").value = state.measure;
  $("cw-text-a").value = state.cw.text_a || "";
  $("cw-text-b").value = state.cw.text_b || "";
  $("cw-word").value = state.cw.word || "";
}

const writeUrl = () => writeModelState(state, defaultsFor(current()));

// ---------- the grid ----------

const key = gridKey;
const columns = gridColumns;
let atlas = null; // many heads: the thumbnails' atlas (model-grid.js), else a canvas each

function buildGrid(L, H, model) {
  buttons = buildHeadGrid(grid, L, H, (l, head) => select(l, head, true));
  grid.dataset.model = model;
  atlas = usesAtlas(L, H) ? thumbAtlas(grid, buttons) : null;
  if (atlas) atlas.layout();
  selected = null;
  markSelected();
}

function flatFor(layer, head) {
  const data = layers.get(layer);
  if (!data) return null;
  if (head === "mean") return mapView(data.average);
  if (head === "rollout") return data.rollout ? mapView(data.rollout) : null; // null: not computed
  return mapView(data.heads, Number(head) - 1);
}

function zmaxFor(flat) {
  return state.scale === "fixed" ? 1 : Math.max(mapMax(flat), 1e-6);
}

/** What drawMap and drawZoom grey in a layer's map: the causal triangle, and beyond the
 * layer's sliding window (not in the rollout, which reaches further through earlier layers). */
function maskOf(layer, head) {
  const windowed = head !== "rollout" && info.sliding_windows;
  const slidingWindow = (windowed && info.sliding_windows[layer - 1]) || null;
  return { causal: info.causal, slidingWindow, positions: meta.positions || null };
}

function drawRow(layer) {
  const T = meta.tokens.length;
  for (const head of columns(info.heads)) {
    const button = buttons.get(key(layer, head));
    const flat = flatFor(layer, head);
    if (button && !flat && head === "rollout" && layers.has(layer)) {
      // The server left the rollout out (a long text): said on the button, not grey forever.
      button.classList.remove("pending");
      button.classList.add("absent");
      button.title = `${mapName(layer, head)}: not computed for this text`;
      continue;
    }
    if (!button || !flat) continue;
    button.classList.remove("absent");
    button.title = mapName(layer, head);
    if (atlas) atlas.paint(button, flat, thumbOptions(flat, layer, head));
    else if (overview || state.scale === "log" || state.sinkApart) drawCells(button.firstChild, flat, thumbOptions(flat, layer, head));
    else drawMap(button.firstChild, flat, T, zmaxFor(flat), maskOf(layer, head));
    button.classList.remove("pending");
    button.dataset.tokens = String(T);
  }
  if (atlas) atlas.flush();
}

/** How a thumbnail is drawn a pixel a cell (a pooled map, the log scale, the sink apart, the atlas). */
function thumbOptions(flat, layer, head) {
  const T = meta.tokens.length;
  const [rows, cols] = meta.pooled ? meta.pooled.shape : [T, T];
  const block = meta.pooled ? meta.pooled.block : [1, 1];
  const zmax = rangeTop(flat, cols, { fixed: state.scale === "fixed", sinkApart: state.sinkApart });
  return { rows, cols, block, T, zmax, log: state.scale === "log", ...maskOf(layer, head) };
}

/** The large map on canvas: long texts (fetched at full resolution), the log scale, the sink apart. */
const canvasMode = () => overview || state.scale === "log" || state.sinkApart;

function showCanvasZoom() {
  const { layer, head } = state;
  const T = meta.tokens.length;
  const full = overview ? null : flatFor(layer, head);
  const request = mapRequest;
  zoomCanvas.show({
    key: `${layer}-${head}`,
    T,
    tokens: tokenLabels(meta.tokens),
    mask: maskOf(layer, head),
    load: (rows, cols) => (full ? Promise.resolve(cropMap(full, T, rows, cols)) : fetchMap({ request, layer, head, rows, cols, T })),
    pick: (row) => chooseToken(row),
    colour: (map) => ({
      zmax: rangeTop(map.values, map.cols, { fixed: state.scale === "fixed", sinkApart: state.sinkApart, firstCol: map.region.cols[0] }),
      log: state.scale === "log",
    }),
  });
  const zoom = $("zoom-plot");
  zoom.dataset.layer = String(layer);
  zoom.dataset.head = head;
  zoom.dataset.tokens = String(T);
}

/** The colours changed (scale, sink): a pooled overview's large map keeps the region it
 * shows and is drawn again from what it holds; other maps are drawn again. */
function redrawAll() {
  for (const layer of layers.keys()) drawRow(layer);
  if (overview) zoomCanvas.redraw();
  else drawSelected();
  drawTokens();
}

function markSelected() {
  const button = buttons.get(key(state.layer, state.head)) || null;
  if (button === selected) return;
  if (selected) {
    selected.setAttribute("aria-pressed", "false");
    selected.tabIndex = -1;
  }
  selected = button;
  if (button) {
    button.setAttribute("aria-pressed", "true");
    button.tabIndex = 0;
  }
}

function select(layer, head, focus = false) {
  const layerChanged = layer !== state.layer;
  state.layer = layer;
  state.head = head;
  markSelected();
  if (focus) buttons.get(key(layer, head))?.focus();
  writeUrl();
  drawSelected();
  if (layerChanged && state.tokenLayer === null) drawTokens();
}

function drawSelected() {
  if (!meta) return;
  const flat = flatFor(state.layer, state.head);
  $("zoom-title").textContent = mapName(state.layer, state.head);
  updateOpenHead();
  const zoom = $("zoom-plot");
  const onCanvas = canvasMode();
  const absent = !flat && layers.has(state.layer) && state.head === "rollout"; // left out by the server
  zoom.hidden = onCanvas || absent;
  zoomCanvas.element.hidden = !onCanvas || absent;
  if (absent) {
    $("zoom-legend").hidden = false;
    $("zoom-legend").textContent = "The server did not compute the rollout for this text (it does not for long texts): open a head or the mean of heads.";
    return;
  }
  if (!flat) return;
  const { layer, head } = state;
  const tokens = meta.tokens;
  const legend = $("zoom-legend");
  const generated = meta.generated || null;
  const parts = [];
  if (info.causal) parts.push("Grey: masked, a token cannot read the tokens after it.");
  const { slidingWindow } = maskOf(layer, head);
  if (info.causal && slidingWindow) parts.push(`This layer reads a sliding window of ${slidingWindow} tokens: the grey below the diagonal is beyond it.`);
  if (generated && generated.includes(true)) parts.push("▸ and the orange outline: tokens the model wrote.");
  legend.hidden = parts.length === 0;
  legend.textContent = parts.join(" ");
  if (onCanvas) return showCanvasZoom();
  drawZoom(zoom, {
    flat,
    tokens,
    zmax: zmaxFor(flat),
    filename: `model-layer${layer}-${head}`,
    readout: $("zoom-readout"),
    ...maskOf(layer, head),
    generated,
  }).then(() => {
    // What the large plot now shows (tests and the curious read these).
    zoom.dataset.layer = String(layer);
    zoom.dataset.head = head;
    zoom.dataset.tokens = String(tokens.length);
  });
}

/** The link from the large map's head to its steps in the explorer (or why there is none). */
function updateOpenHead() {
  const link = $("open-head");
  const note = $("open-head-note");
  const isHead = /^\d+$/.test(state.head);
  if (!shown || !isHead) {
    link.hidden = true;
    note.hidden = true;
    return;
  }
  const text = shown.task === "generate" ? shown.prompt + (meta.generated_text || "") : shown.text;
  const target = realHeadLink({ model: info.name, text, textB: shown.textB, layer: state.layer, head: Number(state.head) });
  link.hidden = !target.fits;
  if (target.fits) {
    link.href = target.href;
    link.textContent = `Layer ${state.layer}, head ${state.head} step by step →`;
  }
  note.hidden = target.fits && shown.task !== "generate";
  note.textContent = !target.fits
    ? `This text is too long for a link to its steps (${target.length.toLocaleString("en-US")} characters; links stay under ${URL_LIMIT.toLocaleString("en-US")}): shorten it to open a head step by step.`
    : "Step by step, the prompt and what the model wrote are read again as one text, so a token may split a little differently.";
}

grid.addEventListener("keydown", (ev) => {
  const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  const move = moves[ev.key];
  const target = ev.target.closest(".map-btn");
  if (!move || !target || !info) return;
  ev.preventDefault();
  const cols = columns(info.heads);
  let layer = Number(target.dataset.layer);
  for (let l = layer + move[0]; move[0] && l >= 1 && l <= info.layers; l += move[0]) {
    if (filter.shows(l)) {
      layer = l;
      break;
    }
  }
  const col = Math.min(cols.length - 1, Math.max(0, cols.indexOf(target.dataset.head) + move[1]));
  select(layer, cols[col], true);
});

// ---------- tokens and the token view ----------

function renderTokens() {
  renderTokenList($("wp-tokens"), meta, { chosen: state.token, onChoose: (i, ev) => chooseToken(i, { ev }) });
  if (state.tokens.length > 1) markTokens($("wp-tokens"), state.tokens);
  tokenSelection.update({ selection: state.tokens, tokens: meta.tokens, combine: state.combine });
  const hidden = meta.all_tokens.length - meta.tokens.length;
  $("token-count").textContent = `(${meta.tokens.length} shown${hidden ? `, ${hidden} hidden` : ""})`;
  renderGenerationSummary($("gen-summary"), meta.generated_tokens ? meta : null);
}

/** The token view's weights: the maps held (short texts: at once), or a promise of the
 * rows asked for (pooled maps). */
function tokenViewRows() {
  const chosen = state.tokens.length > 1 ? state.tokens : state.token === null ? [] : [state.token];
  if (!overview || !rowSource || !chosen.length || chosen.some((t) => t >= meta.tokens.length)) return rowsOfLayers(layers);
  const rows = chosen.map((s) => rowFor({ s, generated: meta.generated || null, positions: meta.positions, when: state.when, causal: info.causal, count: meta.tokens.length }));
  if (rows.some((r) => r.query === null)) return rowsOfLayers(layers);
  const shown = Array.from({ length: info.layers }, (_, i) => i + 1).filter((l) => filter.shows(l));
  const wanted = [...new Set([...shown, Math.min(state.tokenLayer ?? state.layer, info.layers)])].sort((a, b) => a - b);
  tokenView.dataset.loading = "true";
  // Each chosen token's row, asked for at full resolution (kept per token by rowSource).
  return Promise.all(rows.map(({ query, keys }) => rowSource.get(query, keys, wanted, info.heads))).then((got) => (l, h, q, k) => {
    const at = rows.findIndex((r) => r.query === q && r.keys === k);
    const values = at < 0 ? null : got[at].get(l);
    return values ? Array.from(values.subarray(h * k, (h + 1) * k)) : null;
  });
}

function drawTokens() {
  if (!meta || !info || !info.layers) return Promise.resolve(); // no layers: nothing a token reads
  tokenView.hidden = false;
  const mine = seq;
  const token = state.token;
  const several = state.tokens.join(",");
  const draw = (row) => {
    if (mine !== seq || token !== state.token || several !== state.tokens.join(",")) return false; // a newer text or token
    return drawTokenView(
      tokenView,
      {
        labels: tokenLabels(meta.tokens),
        tokens: meta.tokens,
        generated: meta.generated || null,
        positions: meta.positions,
        causal: info.causal,
        row,
        L: info.layers,
        H: info.heads,
        chosen: state.token,
        queries: state.tokens.length > 1 ? state.tokens : null,
        combine: state.combine,
        layer: Math.min(state.tokenLayer ?? state.layer, info.layers),
        when: state.when,
      },
      {
        onChoose: (i) => chooseToken(i, { scroll: false }),
        onMode: (mode) => {
          headViewMode = mode;
        },
        headViewMode,
      },
    ).then(() => true);
  };
  const rows = tokenViewRows();
  const done = typeof rows === "function" ? Promise.resolve(draw(rows)) : rows.then(draw);
  return done.then(
    (drawn) => {
      if (!drawn || mine !== seq) return;
      delete tokenView.dataset.loading;
      tokenView.dataset.token = state.token === null ? "" : String(state.token);
      tokenView.dataset.drawnTokens = state.tokens.length > 1 ? `${state.tokens.join(",")}:${state.combine}` : "";
    },
    (err) => {
      if (mine !== seq || token !== state.token) return;
      delete tokenView.dataset.loading;
      $("tv-what").textContent = `This token's weights could not be loaded: ${err.detail ? JSON.stringify(err.detail) : err.message}`;
    },
  );
}

/** Show what token i reads (a generated token: what the model read when it wrote it);
 * a shift/ctrl-click (or any click with "Select several" on) adds it to the chosen tokens,
 * or removes it. */
function chooseToken(i, { scroll = true, ev = null } = {}) {
  if (!meta || !Number.isInteger(i) || i < 0 || i >= meta.tokens.length) return;
  state.tokens = adds(ev, tokenSelection.selecting()) ? toggled(state.tokens, state.token, i) : [];
  state.token = state.tokens.length === 1 ? state.tokens[0] : i;
  markChosenToken($("wp-tokens"), state.token);
  if (state.tokens.length > 1) markTokens($("wp-tokens"), state.tokens);
  tokenSelection.update({ selection: state.tokens, tokens: meta.tokens, combine: state.combine });
  writeUrl();
  drawTokens();
  if (scroll) {
    const box = tokenView.getBoundingClientRect();
    if (box.top > window.innerHeight - 80) tokenView.scrollIntoView({ block: "start", behavior: "instant" });
  }
}

// Two texts (or two checkpoints), one head, and their difference (model-two-texts.js).
mountTwoTexts($("two-texts"), { models: MODELS, defaultModel: DEFAULT_MODEL, page: () => ({ model: state.model, text: state.text, layer: state.layer, head: state.head }) });

// Several tokens at once (model-multi-token.js): the chips, "Select several", sum or mean.
const tokenSelection = mountTokenSelection($("tv-select"), {
  onRemove: (i) => setTokens(state.tokens.filter((t) => t !== i)),
  onClear: () => setTokens([]),
  onCombine: (combine) => {
    state.combine = combine;
    writeUrl();
    drawTokens();
  },
  onSelecting: () => {},
});

function setTokens(selection) {
  state.tokens = selection;
  if (selection.length) state.token = selection[selection.length - 1];
  if (meta) renderTokens();
  writeUrl();
  drawTokens();
}

$("tv-layer").addEventListener("change", (ev) => {
  state.tokenLayer = Number(ev.target.value);
  writeUrl();
  drawTokens();
});
tokenView.addEventListener("change", (ev) => {
  if (ev.target.name !== "tv-when") return;
  state.when = ev.target.value;
  writeUrl();
  drawTokens();
});

/** The row under clientY in a box whose top and bottom edges are the rows [top, bottom] (in y units). */
function rowAt(box, [top, bottom], clientY) {
  if (clientY < box.top || clientY >= box.bottom) return null;
  return Math.round(top + ((clientY - box.top) / box.height) * (bottom - top));
}

/** Which token a click on the large map names: a row label, or the row of a cell. */
function zoomRowAt(ev) {
  const target = ev.target instanceof Element ? ev.target : null;
  if (!target || !meta) return null;
  const T = meta.tokens.length;
  const zoom = $("zoom-plot");
  const tick = target.closest(".ytick");
  if (tick) {
    if (tick.__data__ && Number.isFinite(tick.__data__.x)) return Math.round(tick.__data__.x);
    const step = T <= 48 ? 1 : Math.ceil(T / 24);
    return [...tick.parentNode.children].indexOf(tick) * step;
  }
  // The quick map's cells lie under its SVG labels layer: find them by the point.
  const cells = target.closest(".quick-plot") && zoom.querySelector(".quick-cells");
  if (cells) {
    const box = cells.getBoundingClientRect();
    const inside = ev.clientX >= box.left && ev.clientX <= box.right && ev.clientY >= box.top && ev.clientY < box.bottom;
    return inside ? Math.min(T - 1, Math.floor(((ev.clientY - box.top) / box.height) * T)) : null;
  }
  // Plotly's plot area (its drag layer gets the click): rows from the y axis' range,
  // so a zoomed-in map names the right row too. Plotly's own plotly_click needs a
  // hover to have landed first, which a quick click does not always give.
  const drag = target.closest(".nsewdrag");
  const range = zoom._fullLayout && zoom._fullLayout.yaxis && zoom._fullLayout.yaxis.range;
  if (drag && range) {
    const row = rowAt(drag.getBoundingClientRect(), [range[1], range[0]], ev.clientY);
    return row === null ? null : Math.min(T - 1, Math.max(0, row));
  }
  return null;
}

$("zoom-plot").addEventListener("click", (ev) => {
  const row = zoomRowAt(ev);
  if (row !== null) chooseToken(row);
});

// ---------- running ----------

/** A promise that settles in a later task (the browser may paint and handle input first). */
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

function stale(reason) {
  markStale(results, $("stale-note"), reason);
}

function setStatus(text) {
  $("model-status").textContent = text;
}

const progress = progressBar($("model-progress"));

async function run() {
  const mine = ++seq;
  clearFieldErrors(form);
  if (modelNote) {
    showFieldError(form, "model", modelNote);
    modelNote = null;
  }
  const entry = current();
  if (!entry) {
    showFieldError(form, "model", "This server has no model it can show.");
    return;
  }
  const generating = state.task === "generate";
  if (generating) {
    const problems = generationProblems(state, LIMITS);
    if (problems.length) {
      for (const [field, text] of problems) showFieldError(form, field, text);
      if (meta) stale(problems.map(([, text]) => text).join(" "));
      setStatus("");
      progress.stop();
      return;
    }
  }
  setStatus(generating ? "The model is writing…" : "Running the model…");
  stale(null); // a new run: the last one's "Out of date" no longer applies
  progress.start();
  grid.dataset.drawn = "0";
  const started = performance.now();
  writeUrl();
  const asked = { task: state.task, text: state.text, textB: isPlainEncoder(entry) ? state.textB : "", prompt: state.prompt };
  const fresh = new Map();
  let drawn = 0;
  let answerInfo = null;
  const callbacks = {
    isCurrent: () => mine === seq,
    onProgress: (event) => progress.update(event),
    onInfo: (answer) => {
      answerInfo = answer;
    },
    onMeta: (body) => {
      performance.mark("model-first-layer");
      info = answerInfo;
      meta = body;
      overview = isPooled(body);
      mapRequest = generating ? null : { ...(state.model ? { model: state.model } : {}), text: state.text, ...(asked.textB ? { text_b: asked.textB } : {}), hide_special: state.hide, measure: state.measure };
      rowSource = mapRequest && tokenRows(mapRequest);
      layers = fresh;
      if (grid.dataset.model !== info.name || !buttons.size) {
        buildGrid(info.layers, info.heads, info.name);
        filter.refresh();
      }
      grid.dataset.overview = String(overview);
      overviewNote.hidden = !overview;
      if (overview) {
        const [b] = body.pooled.block;
        overviewNote.textContent = `${meta.tokens.length} tokens: each thumbnail is pooled, a cell the largest weight of a ${b} × ${b} block of token pairs. Open a map (click, or Enter) for it at full resolution, and drag across it to zoom into a region. Choose a token (in the list, or click a row of the large map) for its row in every head, asked for at full resolution.${meta.tokens.length > ANALYSIS_TOKENS ? ` Head scores, ablation and the logit lens need every full map: they are offered for texts of at most ${ANALYSIS_TOKENS} tokens.` : ""}`;
      }
      if (state.layer > info.layers) state.layer = 1;
      if (/^\d+$/.test(state.head) && Number(state.head) > info.heads) state.head = "1";
      if (state.tokenLayer !== null && state.tokenLayer > info.layers) state.tokenLayer = null;
      if (state.token !== null && state.token >= meta.tokens.length) state.token = null;
      state.tokens = state.tokens.filter((t) => t < meta.tokens.length);
      markSelected();
      for (const button of buttons.values()) button.classList.add("pending");
      renderTokens();
    },
    onLayer: (n, data) => {
      fresh.set(n, data);
      drawRow(n);
      drawn += info.heads + EXTRA_MAPS.length;
    },
  };
  try {
    if (generating) {
      const sampled = state.sampling === "sample";
      await generateLayers({
        model: state.model,
        prompt: state.prompt,
        maxNew: state.maxNew,
        temperature: sampled ? state.temperature : 0,
        topK: sampled ? state.topK : null,
        seed: sampled ? state.seed : null,
        hideSpecial: state.hide,
        ...callbacks,
      });
    } else {
      await fetchLayers({ model: state.model, text: state.text, textB: asked.textB || null, hideSpecial: state.hide, measure: state.measure, ...callbacks });
    }
    if (mine !== seq) return;
    progress.stop();
    shown = asked;
    if (generating && state.sampling === "sample" && state.seed === null) {
      // The seed the server drew: kept in the form and the link, so a reload writes the same.
      state.seed = meta.seed;
      $("gen-seed").value = String(meta.seed);
      writeUrl();
    }
    performance.mark("model-grid-drawn");
    stale(null);
    // The large map, the token view and the analysis cards each in a task of their own,
    // so the page answers input between them (no one long task after the last layer).
    await nextTask();
    if (mine !== seq) return;
    drawSelected();
    await nextTask();
    if (mine !== seq) return;
    drawTokens();
    grid.dataset.drawn = String(drawn);
    grid.dataset.tokens = String(meta.tokens.length);
    await nextTask();
    if (mine !== seq) return;
    // Head scores, ablation and the logit lens need every full map of the text: a pooled
    // text past ANALYSIS_TOKENS is not offered them (the server refuses such texts).
    whyCell.clear();
    if (generating || asked.textB || (overview && meta.tokens.length > ANALYSIS_TOKENS)) {
      analysis.clear();
      attribution.clear();
      explained = null;
    } else {
      const ablation = !(current() && current().kind === ENCODER_DECODER); // encoder-decoders: scores only
      analysis.show({ model: state.model, text: asked.text, causal: info.causal, layers: info.layers, heads: info.heads, ablation });
      if (ablation) attribution.show({ model: state.model, text: asked.text, causal: info.causal, tokens: meta.tokens });
      else attribution.clear();
      explained = ablation ? { model: state.model, text: asked.text, causal: info.causal, tokens: meta.tokens } : null;
    }
    const what = generating ? `${meta.generated_tokens.length} written, ` : "";
    const sizes = info.layers ? `${countOf(info.layers, "layer")} × ${countOf(info.heads, "head")}` : "no attention layers";
    setStatus(`${meta.tokens.length} tokens (${what}${sizes}) in ${Math.round(performance.now() - started)} ms`);
    explainUnknown($("unk-note"), {
      tokens: meta.tokens,
      texts: generating ? [asked.prompt] : [asked.text, asked.textB],
      model: info.name,
      modelName: info.name.split("/").pop(),
      limits: LIMITS,
      isCurrent: () => mine === seq,
      lookup: isPlainEncoder(current()), // /api/model/embeddings lists an encoder's word pieces
    });
  } catch (err) {
    if (mine !== seq) return;
    progress.stop();
    const messages = showFieldErrors(form, plainModelError(err), modelErrorPlace);
    if (meta) stale(messages.join(" "));
    setStatus(meta ? "The maps below are still those of the last input that could be computed." : "");
  }
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  readForm();
  run();
});

// Enter runs, Shift+Enter makes a new line.
for (const id of ["model-text", "model-text-b", "gen-prompt"]) {
  $(id).addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
}

$("model-pick").addEventListener("change", (ev) => {
  readForm();
  const name = ev.target.value;
  const before = defaultsFor(current());
  state.model = name === DEFAULT_MODEL ? null : name;
  // Texts left as the last model's defaults become this one's (a run's probe).
  const after = defaultsFor(current());
  if (state.text === before.text) state.text = after.text;
  if (state.prompt === before.prompt) state.prompt = after.prompt;
  fillForm();
  state.token = null;
  state.tokens = [];
  state.tokenLayer = null;
  applyKind();
  run();
  stacks.update();
});

for (const radio of form.querySelectorAll("input[name='task']")) {
  radio.addEventListener("change", () => {
    readForm();
    state.task = radio.value;
    state.token = null;
    state.tokens = [];
    applyKind();
    run();
  });
}

$("gen-sampling").addEventListener("change", (ev) => {
  state.sampling = ev.target.value;
  applyKind();
});

$("hide-special").addEventListener("change", (ev) => {
  state.hide = ev.target.checked;
  form.requestSubmit();
});

$("map-measure").addEventListener("change", (ev) => {
  state.measure = ev.target.value;
  form.requestSubmit();
});

$("colour-scale").addEventListener("change", (ev) => {
  state.scale = ev.target.value;
  writeUrl();
  if (meta) redrawAll();
});

$("sink-apart").addEventListener("change", (ev) => {
  state.sinkApart = ev.target.checked;
  writeUrl();
  if (meta) redrawAll();
});

// ---------- compare one word (encoders) ----------

async function runCompare() {
  clearCompareErrors(cwForm);
  const body = { text_a: state.cw.text_a, text_b: state.cw.text_b, word: state.cw.word };
  if (state.model) body.model = state.model;
  try {
    const result = await modelApi.compareWord(body);
    const rows = result.cosines.map((c, i) =>
      el("tr", { "data-testid": "cw-row" }, [
        el("th", { scope: "row", text: i === 0 ? "0 (embeddings)" : String(i) }),
        el("td", { "data-testid": "cw-cosine", text: c.toFixed(4) }),
      ]),
    );
    $("cw-rows").replaceChildren(...rows);
    await drawCosines($("cw-plot"), { cosines: result.cosines, word: result.word });
  } catch (err) {
    showCompareErrors(cwForm, err);
  }
}

cwForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.cw = { text_a: $("cw-text-a").value, text_b: $("cw-text-b").value, word: $("cw-word").value.trim() };
  writeUrl();
  runCompare();
});

// ---------- start ----------

function start() {
  checkUrlModel();
  fillForm();
  applyKind();
  stacks.update();
  run().then(() => {
    const entry = current();
    if (isPlainEncoder(entry) && state.cw.text_a && state.cw.text_b && state.cw.word) runCompare();
  });
}

// Plotly is not on this page until a reader reaches for a plot (heatmap.js).
start();
