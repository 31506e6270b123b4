// The real-model page: a pretrained encoder's attention for every layer and
// head (compact uint8 per layer, drawn on canvas), one map large in Plotly,
// attention rollout, and one word's cosine across two texts, layer by layer.

import { clearErrors, showErrors } from "./api.js";
import { byTestId, el, initialData } from "./dom.js";
import { drawMap, mapMax } from "./model-canvas.js";
import { fetchLayers, mapView, modelApi } from "./model-data.js";
import { drawCosines, drawZoom } from "./model-plots.js";
import { replaceQuery } from "./state.js";

const init = initialData();
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);
const form = $("model-form");
const cwForm = $("compare-word-form");
const grid = $("head-grid");

const EXTRA = ["mean", "rollout"];

const state = {
  text: init.text || "",
  textB: init.text_b || "",
  hide: false,
  scale: "map",
  layer: 1,
  head: "1", // "1".."H", "mean" or "rollout"
  cw: { ...(init.compare || {}) },
};

let info = null; // /api/model
let meta = null; // tokens etc. of the current answer
let layers = new Map(); // layer number -> {heads, average, rollout}
let buttons = new Map(); // "L-head" -> button
let seq = 0;

// ---------- URL state ----------

function readUrl() {
  const p = new URLSearchParams(window.location.search);
  if (p.has("text")) state.text = p.get("text");
  if (p.has("text_b")) state.textB = p.get("text_b");
  state.hide = p.get("hide") === "1";
  if (p.get("scale") === "fixed") state.scale = "fixed";
  const layer = Number.parseInt(p.get("layer") || "", 10);
  if (Number.isInteger(layer) && layer >= 1) state.layer = layer;
  const head = p.get("head");
  if (head && (EXTRA.includes(head) || /^\d+$/.test(head))) state.head = head;
  if (p.has("ca")) state.cw.text_a = p.get("ca");
  if (p.has("cb")) state.cw.text_b = p.get("cb");
  if (p.has("w")) state.cw.word = p.get("w");
}

function writeUrl() {
  const p = new URLSearchParams();
  p.set("text", state.text);
  if (state.textB) p.set("text_b", state.textB);
  if (state.hide) p.set("hide", "1");
  if (state.scale !== "map") p.set("scale", state.scale);
  p.set("layer", String(state.layer));
  p.set("head", state.head);
  p.set("ca", state.cw.text_a || "");
  p.set("cb", state.cw.text_b || "");
  p.set("w", state.cw.word || "");
  replaceQuery(p);
}

// ---------- the grid ----------

const key = (layer, head) => `${layer}-${head}`;

function mapName(layer, head) {
  if (head === "mean") return `Layer ${layer}, mean of heads`;
  if (head === "rollout") return `Rollout through layer ${layer}`;
  return `Layer ${layer}, head ${head}`;
}

function buildGrid(L, H) {
  const cells = [el("span", { class: "col-label", "aria-hidden": "true" })];
  for (let h = 1; h <= H; h++) cells.push(el("span", { class: "col-label", text: `H${h}` }));
  cells.push(el("span", { class: "col-label extra", text: "mean" }), el("span", { class: "col-label extra", text: "rollout" }));
  buttons = new Map();
  const heads = [...Array.from({ length: H }, (_, i) => String(i + 1)), ...EXTRA];
  for (let l = 1; l <= L; l++) {
    cells.push(el("span", { class: "row-label", text: `Layer ${l}` }));
    for (const head of heads) {
      const testid = EXTRA.includes(head) ? `map-L${l}-${head}` : `map-L${l}-H${head}`;
      const button = el(
        "button",
        {
          type: "button",
          class: `map-btn pending${EXTRA.includes(head) ? " extra" : ""}`,
          "data-testid": testid,
          "data-layer": l,
          "data-head": head,
          "data-kind": EXTRA.includes(head) ? head : "head",
          "aria-label": mapName(l, head),
          "aria-pressed": "false",
          title: mapName(l, head),
          tabindex: "-1",
          onclick: () => select(l, head, true),
        },
        [el("canvas", { width: 1, height: 1, "aria-hidden": "true" })],
      );
      buttons.set(key(l, head), button);
      cells.push(button);
    }
  }
  grid.style.gridTemplateColumns = `3.4rem repeat(${H + 2}, 42px)`;
  grid.replaceChildren(...cells);
  grid.dataset.layers = String(L);
  grid.dataset.heads = String(H);
  markSelected();
}

function flatFor(layer, head) {
  const data = layers.get(layer);
  if (!data) return null;
  if (head === "mean") return mapView(data.average);
  if (head === "rollout") return mapView(data.rollout);
  return mapView(data.heads, Number(head) - 1);
}

function zmaxFor(flat) {
  return state.scale === "fixed" ? 1 : Math.max(mapMax(flat), 1e-6);
}

function drawRow(layer) {
  const T = meta.tokens.length;
  const H = info.heads;
  for (const head of [...Array.from({ length: H }, (_, i) => String(i + 1)), ...EXTRA]) {
    const button = buttons.get(key(layer, head));
    const flat = flatFor(layer, head);
    if (!button || !flat) continue;
    drawMap(button.firstChild, flat, T, zmaxFor(flat));
    button.classList.remove("pending");
    button.dataset.tokens = String(T);
  }
}

function redrawAll() {
  for (const layer of layers.keys()) drawRow(layer);
  drawSelected();
}

function markSelected() {
  for (const [k, button] of buttons) {
    const on = k === key(state.layer, state.head);
    button.setAttribute("aria-pressed", on ? "true" : "false");
    button.tabIndex = on ? 0 : -1;
  }
}

function select(layer, head, focus = false) {
  state.layer = layer;
  state.head = head;
  markSelected();
  if (focus) buttons.get(key(layer, head))?.focus();
  writeUrl();
  drawSelected();
}

function drawSelected() {
  if (!meta) return;
  const flat = flatFor(state.layer, state.head);
  $("zoom-title").textContent = mapName(state.layer, state.head);
  const zoom = $("zoom-plot");
  if (!flat) return;
  const { layer, head } = state;
  const tokens = meta.tokens;
  drawZoom(zoom, {
    flat,
    tokens,
    zmax: zmaxFor(flat),
    filename: `model-layer${layer}-${head}`,
    readout: $("zoom-readout"),
  }).then(() => {
    // What the large plot now shows (tests and the curious read these).
    zoom.dataset.layer = String(layer);
    zoom.dataset.head = head;
    zoom.dataset.tokens = String(tokens.length);
  });
}

grid.addEventListener("keydown", (ev) => {
  const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
  const move = moves[ev.key];
  const target = ev.target.closest(".map-btn");
  if (!move || !target || !info) return;
  ev.preventDefault();
  const columns = [...Array.from({ length: info.heads }, (_, i) => String(i + 1)), ...EXTRA];
  const layer = Math.min(info.layers, Math.max(1, Number(target.dataset.layer) + move[0]));
  const col = Math.min(columns.length - 1, Math.max(0, columns.indexOf(target.dataset.head) + move[1]));
  select(layer, columns[col], true);
});

// ---------- tokens ----------

function renderTokens() {
  const items = meta.tokens.map((token, i) => {
    const special = token === "[CLS]" || token === "[SEP]";
    const cls = ["wp-token", special ? "special" : "", meta.token_type_ids[i] === 1 ? "seg-b" : "", token.startsWith("##") ? "piece" : ""];
    return el("li", { class: cls.filter(Boolean).join(" "), "data-testid": "wp-token", title: `position ${meta.positions[i]}`, text: token });
  });
  $("wp-tokens").replaceChildren(...items);
  const hidden = meta.all_tokens.length - meta.tokens.length;
  $("token-count").textContent = `(${meta.tokens.length} shown${hidden ? `, ${hidden} hidden` : ""})`;
}

// ---------- running ----------

async function run() {
  const mine = ++seq;
  clearErrors(form);
  const status = $("model-status");
  status.textContent = "Running the model…";
  grid.dataset.drawn = "0";
  const started = performance.now();
  try {
    writeUrl();
    const fresh = new Map();
    let drawn = 0;
    await fetchLayers({
      text: state.text,
      textB: state.textB || null,
      hideSpecial: state.hide,
      isCurrent: () => mine === seq,
      onInfo: (answer) => {
        if (!info) {
          info = answer;
          $("model-name").textContent = info.name;
        }
        if (!grid.dataset.layers) buildGrid(info.layers, info.heads);
        if (state.layer > info.layers) state.layer = 1;
        if (/^\d+$/.test(state.head) && Number(state.head) > info.heads) state.head = "1";
        markSelected();
      },
      onMeta: (body) => {
        performance.mark("model-first-layer");
        meta = body;
        layers = fresh;
        for (const button of buttons.values()) button.classList.add("pending");
        renderTokens();
      },
      onLayer: (n, data) => {
        fresh.set(n, data);
        drawRow(n);
        drawn += info.heads + EXTRA.length;
      },
    });
    if (mine !== seq) return;
    performance.mark("model-grid-drawn");
    grid.dataset.drawn = String(drawn);
    grid.dataset.tokens = String(meta.tokens.length);
    // The large Plotly map after the canvases: it costs more than all 84 of them.
    drawSelected();
    status.textContent = `${meta.tokens.length} tokens · ${info.layers} layers × ${info.heads} heads in ${Math.round(performance.now() - started)} ms`;
  } catch (err) {
    if (mine !== seq) return;
    status.textContent = meta ? "The maps below are still those of the previous text." : "";
    showErrors(form, err);
  }
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.text = $("model-text").value;
  state.textB = $("model-text-b").value.trim() ? $("model-text-b").value : "";
  run();
});

// Enter runs, Shift+Enter makes a new line.
for (const id of ["model-text", "model-text-b"]) {
  $(id).addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
}

$("hide-special").addEventListener("change", (ev) => {
  state.hide = ev.target.checked;
  form.requestSubmit();
});

$("colour-scale").addEventListener("change", (ev) => {
  state.scale = ev.target.value;
  writeUrl();
  if (meta) redrawAll();
});

// ---------- compare one word ----------

async function runCompare() {
  clearErrors(cwForm);
  const body = { text_a: state.cw.text_a, text_b: state.cw.text_b, word: state.cw.word };
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
    showErrors(cwForm, err);
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
  readUrl();
  $("model-text").value = state.text;
  $("model-text-b").value = state.textB;
  $("hide-special").checked = state.hide;
  $("colour-scale").value = state.scale;
  $("cw-text-a").value = state.cw.text_a || "";
  $("cw-text-b").value = state.cw.text_b || "";
  $("cw-word").value = state.cw.word || "";
  run().then(() => {
    if (state.cw.text_a && state.cw.text_b && state.cw.word) runCompare();
  });
}

// plotly.min.js is not on this page until the first Plotly figure asks for it (heatmap.js).
start();
