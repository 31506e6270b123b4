// Notebook views (attention_viz.head_view, model_view, show, explore): one self-contained
// page per view, drawn from its data block by the /model page's own modules (the map
// grid, the large map, the token view, the head view) and the explorer's heatmaps.
// app/notebook/render.py inlines this module and its imports; nothing is fetched.
//
// The data block: {view: "maps" | "head" | "explore" | "why" | "attribute", title,
// sections, ...} (why and attribute: {answer}, the JSON API's answer). A maps
// section: {name, title, queries, keys, causal, pooled (block size, 1 = every token),
// layers (numbers), heads (numbers), maps (compact (L, H, Tq, Tk)), mean, rollout
// (compact (L, Tq, Tk) or null)}.

import { el } from "./dom.js";
import { drawHeadView } from "./headview.js";
import { drawHeatmap } from "./heatmap.js";
import { tokenLabels } from "./labels.js";
import { attributionNodes } from "./model-attribution.js";
import { drawMap, mapMax } from "./colour.js";
import { decodeCompact } from "./model-data.js";
import { drawZoom } from "./model-plots.js";
import { whyNodes } from "./model-why.js";
import { tokenViewParts } from "./notebook-token-view.js";

const data = JSON.parse(document.getElementById("view-data").textContent);
const root = document.querySelector("main");

// The frame fits its content (a srcdoc frame is same-origin with the notebook's page).
function fitFrame() {
  const frame = window.frameElement;
  if (frame) frame.style.height = `${Math.ceil(document.documentElement.getBoundingClientRect().height) + 4}px`;
}
new ResizeObserver(fitFrame).observe(document.documentElement);

const card = (title, ...children) => el("section", { class: "card" }, [el("h2", { text: title }), ...children]);
// The grid's card scrolls sideways when the heads do not fit (as on /model).
const gridCard = (...args) => Object.assign(card(...args), { className: "card grid-card" });

/** One (Tq, Tk) map of a decoded (..., Tq, Tk) tensor, as a Float32Array view. */
function matrix(decoded, index) {
  const [Tq, Tk] = decoded.shape.slice(-2);
  return decoded.values.subarray(index * Tq * Tk, (index + 1) * Tq * Tk);
}

// ---------- the map grid, the large map and the token view ----------

function mapsSection(section) {
  const s = sectionMaps(section);
  const zoom = {
    plot: el("div", { class: "plot zoom-plot", "data-testid": "zoom-plot" }),
    title: el("h2", { "data-testid": "zoom-title" }),
    readout: el("p", { class: "readout", "data-testid": "zoom-readout", "aria-live": "polite" }),
  };
  const buttons = [];
  const select = (l, head) => {
    for (const b of buttons) b.setAttribute("aria-pressed", String(b._l === l && b._head === head));
    drawLarge(s, zoom, l, head);
  };
  const grid = mapGrid(s, buttons, select);
  const parts = [
    data.sections.length > 1 ? el("h2", { class: "section-title", text: section.title }) : null,
    pooledNote(section),
    el("div", { class: "model-layout" }, [
      gridCard("Every layer × every head", el("p", { class: "hint", text: "Click a map to open it large. Row = the token that attends, column = the token attended to." }), grid),
      el("section", { class: "card zoom-card", "data-testid": "zoom-card" }, [zoom.title, zoom.plot, zoom.readout]),
    ]),
  ];
  if (s.square && section.pooled === 1) parts.push(...tokenViewParts(section, s.maps, s.H));
  root.append(el("div", { class: "nb-section", "data-testid": `section-${section.name}` }, parts));
  select(0, 0);
}

/** A maps section decoded: its maps (and mean and rollout, when sent), and each map's cells and name. */
function sectionMaps(section) {
  const maps = decodeCompact(section.maps);
  const mean = section.mean ? decodeCompact(section.mean) : null;
  const rollout = section.rollout ? decodeCompact(section.rollout) : null;
  const H = section.heads.length;
  return {
    section,
    maps,
    H,
    square: section.queries.length === section.keys.length && section.square,
    extras: [mean && "mean", rollout && "rollout"].filter(Boolean),
    qLabels: tokenLabels(section.queries),
    kLabels: tokenLabels(section.keys),
    flatOf(l, head) {
      if (head === "mean") return matrix(mean, l);
      if (head === "rollout") return matrix(rollout, l);
      return matrix(maps, l * H + head);
    },
    nameOf(l, head) {
      const layer = section.layers[l];
      if (head === "mean") return `Layer ${layer}, mean of heads`;
      if (head === "rollout") return `Rollout through layer ${layer}`;
      return `Layer ${layer}, head ${section.heads[head]}`;
    },
  };
}

/** The chosen map large: the /model page's large map when square, a labelled heatmap when not. */
function drawLarge(s, zoom, l, head) {
  zoom.title.textContent = s.nameOf(l, head);
  const flat = s.flatOf(l, head);
  if (s.square) {
    drawZoom(zoom.plot, { flat, tokens: s.section.queries, zmax: mapMax(flat) || 1, filename: "attention", readout: zoom.readout, causal: s.section.causal });
    return;
  }
  const [Tq, Tk] = s.maps.shape.slice(-2);
  const z = Array.from({ length: Tq }, (_, i) => Array.from(flat.subarray(i * Tk, (i + 1) * Tk)));
  drawHeatmap(zoom.plot, { z, rows: s.qLabels, cols: s.kLabels, kind: "weights", rowTitle: "attending (query)", colTitle: "attended to (key)", filename: "attention" });
}

/** Every layer × every head (and the mean and rollout) as small maps; buttons collects them, a click selects one. */
function mapGrid(s, buttons, select) {
  const { section, extras } = s;
  const grid = el("div", { class: "head-grid", "data-testid": "head-grid", role: "group", "aria-label": "Attention maps by layer and head" });
  const cells = [el("span", { class: "col-label", "aria-hidden": "true" })];
  for (const h of section.heads) cells.push(el("span", { class: "col-label", text: `H${h}` }));
  for (const x of extras) cells.push(el("span", { class: "col-label extra", text: x }));
  for (let l = 0; l < section.layers.length; l++) {
    cells.push(el("span", { class: "row-label", text: `Layer ${section.layers[l]}` }));
    for (const head of [...section.heads.keys(), ...extras]) {
      const button = mapButton(s, l, head, select);
      buttons.push(button);
      cells.push(button);
    }
  }
  grid.style.gridTemplateColumns = `3.4rem repeat(${s.H + extras.length}, 42px)`;
  grid.replaceChildren(...cells);
  return grid;
}

/** One small map (layer index l, head index or "mean"/"rollout") as a button. */
function mapButton(s, l, head, select) {
  const canvas = el("canvas", { width: 1, height: 1, "aria-hidden": "true" });
  const extra = typeof head === "string";
  const layer = s.section.layers[l];
  const button = el("button", {
    type: "button",
    class: `map-btn${extra ? " extra" : ""}`,
    "data-testid": extra ? `map-L${layer}-${head}` : `map-L${layer}-H${s.section.heads[head]}`,
    "aria-label": s.nameOf(l, head),
    title: s.nameOf(l, head),
    "aria-pressed": "false",
    onclick: () => select(l, head),
  }, [canvas]);
  button._l = l;
  button._head = head;
  const flat = s.flatOf(l, head);
  if (s.square) drawMap(canvas, flat, s.section.queries.length, mapMax(flat) || 1, { causal: s.section.causal });
  else drawRect(canvas, flat, s.maps.shape.slice(-2));
  return button;
}

/** What a pooled section's cells are (none when every token has its own). */
function pooledNote(section) {
  if (section.pooled <= 1) return null;
  const text = `${section.tokens_total} tokens: each cell is the largest weight of a block of ${section.pooled} × ${section.pooled} tokens (pool_above=${data.pool_above}).`;
  return el("p", { class: "notice", "data-testid": "pooled-note", text });
}

/** A Tq × Tk map onto canvas (cross-attention: not square, never causal). */
function drawRect(canvas, flat, [Tq, Tk]) {
  const zmax = mapMax(flat) || 1;
  const side = Math.max(Tq, Tk);
  const padded = new Float32Array(side * side);
  for (let i = 0; i < Tq; i++) padded.set(flat.subarray(i * Tk, (i + 1) * Tk), i * side);
  drawMap(canvas, padded, side, zmax);
}

// ---------- bertviz's head view: one layer, every head, lines from a token ----------

function headSection(section) {
  const maps = decodeCompact(section.maps);
  const H = section.heads.length;
  const [Tq, Tk] = maps.shape.slice(-2);
  const qLabels = tokenLabels(section.queries);
  const kLabels = tokenLabels(section.keys);
  const ranges = sentenceRanges(section, Tq, Tk);
  const { layerSelect, pairSelect } = headControls(section, ranges);
  const view = el("div", { id: `hv-${section.name}`, "data-testid": "headview" });
  const thumbs = el("div", { class: "head-grid", "data-testid": "head-grid" });
  let query = Tq - 1; // the last token: in a decoder, the one that reads every other
  const draw = () => {
    const l = Number(layerSelect.value);
    const [[q0, q1], [k0, k1]] = ranges[pairSelect.value];
    query = Math.min(query, q1 - q0 - 1);
    const start = (q0 + query) * Tk;
    const rows = Array.from({ length: H }, (_, h) => Array.from(matrix(maps, l * H + h).subarray(start + k0, start + k1)));
    drawHeadView(view, { queries: qLabels.slice(q0, q1), keys: kLabels.slice(k0, k1), query, rows }, {
      onSelect: (i) => {
        query = i;
        draw();
      },
    });
    drawLayerThumbs(thumbs, section, maps, l);
  };
  layerSelect.addEventListener("change", draw);
  pairSelect.addEventListener("change", () => {
    query = Tq;
    draw();
  });
  root.append(gridCard(section.title, el("div", { class: "hv-controls" }, [layerSelect, pairSelect]), view, el("h3", { text: "This layer's heads" }), thumbs));
  draw();
  // bertviz's `heads`: the heads shown at first (the others stay a click away).
  if (data.shown_heads) {
    view.querySelectorAll("[data-testid='headview-head']").forEach((box, h) => {
      box.checked = data.shown_heads.includes(section.heads[h]);
    });
    view._hvRedraw();
  }
}

/** The query and key ranges to show: all tokens, and with a second sentence (bertviz's sentence_b_start) each pair of sentences. */
function sentenceRanges(section, Tq, Tk) {
  const split = data.sentence_b_start;
  const ranges = { all: [[0, Tq], [0, Tk]] };
  if (split !== null && split !== undefined && section.square) {
    Object.assign(ranges, { "A → A": [[0, split], [0, split]], "A → B": [[0, split], [split, Tk]], "B → A": [[split, Tq], [0, split]], "B → B": [[split, Tq], [split, Tk]] });
  }
  return ranges;
}

/** The layer's select (the view's layer first) and the sentences' (hidden with one sentence). */
function headControls(section, ranges) {
  const layerSelect = el("select", { "data-testid": "hv-layer", "aria-label": "Layer" },
    section.layers.map((n, i) => el("option", { value: i, text: `Layer ${n}` })));
  layerSelect.value = String(Math.min(data.layer || 0, section.layers.length - 1));
  const pairSelect = el("select", { "data-testid": "hv-pair", "aria-label": "Sentences" },
    Object.keys(ranges).map((k) => el("option", { value: k, text: k === "all" ? "all tokens" : `sentence ${k}` })));
  pairSelect.hidden = Object.keys(ranges).length === 1;
  return { layerSelect, pairSelect };
}

/** Layer index l's heads as small maps. */
function drawLayerThumbs(thumbs, section, maps, l) {
  const H = section.heads.length;
  const [Tq, Tk] = maps.shape.slice(-2);
  const cells = section.heads.map((h, i) => {
    const canvas = el("canvas", { width: 1, height: 1, "aria-hidden": "true" });
    const flat = matrix(maps, l * H + i);
    if (Tq === Tk) drawMap(canvas, flat, Tq, mapMax(flat) || 1, { causal: section.causal });
    else drawRect(canvas, flat, [Tq, Tk]);
    return el("span", { class: "map-btn", title: `head ${h}` }, [canvas]);
  });
  thumbs.style.gridTemplateColumns = `repeat(${H}, 42px)`;
  thumbs.replaceChildren(...cells);
}

// ---------- the explorer's pipeline, step by step ----------

function exploreView() {
  const trace = data.trace;
  const cols = (n, prefix) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  let box = root;
  const plot = (title, z, rows, colLabels, kind) => {
    const div = el("div", { class: "plot", "data-testid": `step-${title}` });
    box.append(card(title, div));
    drawHeatmap(div, { z, rows, cols: colLabels, kind, filename: title });
  };
  const tokens = tokenLabels(trace.tokens);
  const sources = tokenLabels(trace.source_tokens);
  if (trace.x) plot("x (the input vectors)", trace.x, tokens, cols(trace.x[0].length, "d"), "signed");
  trace.heads.forEach((head, h) => {
    if (trace.num_heads > 1) root.append(el("h2", { class: "section-title", text: `Head ${h + 1}` }));
    box = root.appendChild(el("div", { class: "nb-steps" }));
    for (const step of data.steps) {
      const z = head[step];
      if (!z) continue;
      const square = step.endsWith("scores") || step === "attn_weights";
      const colLabels = square ? sources : cols(z[0].length, "d");
      const rowLabels = step === "k" || step === "v" ? sources : tokens;
      plot(step, z, rowLabels, colLabels, step === "attn_weights" ? "weights" : "signed");
    }
  });
  box = root;
  if (trace.output) plot("output", trace.output, tokens, cols(trace.output[0].length, "d"), "signed");
}

// ---------- why a cell, which heads matter (attention_viz.why, attention_viz.attribute) ----------

function whyView(answer) {
  const nodes = whyNodes(answer);
  root.append(card(nodes.title, el("p", { class: "why-summary", text: nodes.summary }), el("div", { class: "why-box" }, nodes.tables)));
}

function attributeView(answer) {
  const nodes = attributionNodes(answer, () => {});
  root.append(card("Which heads matter", el("p", { class: "attr-note", text: nodes.note }), el("div", { class: "attr-grids" }, nodes.grids), nodes.table));
}

root.append(el("h1", { class: "nb-title", text: data.title }));
if (data.view === "explore") exploreView();
else if (data.view === "why") whyView(data.answer);
else if (data.view === "attribute") attributeView(data.answer);
else for (const section of data.sections) (data.view === "head" ? headSection : mapsSection)(section);
document.body.dataset.drawn = "1";
fitFrame();
