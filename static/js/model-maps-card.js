// /model's grid card: every layer × head (and each layer's mean and rollout) as a
// thumbnail drawn a pixel a cell (a long text's maps as the server pooled them), the
// layer filter, the pooled overview's note, the arrow keys; a thumbnail opens its map
// in the zoom card (model-zoom-card.js).  Mounted over the page (model-page.js).

import { drawCells, drawMap, mapMax, rangeTop } from "./colour.js";
import { el } from "./dom.js";
import { mapView } from "./model-data.js";
import { buildHeadGrid, gridColumns, gridKey, mapName, thumbAtlas, usesAtlas } from "./model-grid.js";
import { layerFilter } from "./model-overview.js";

/** Layer `layer`'s map `head` (a head number, "mean" or "rollout") of the maps shown; null when absent. */
export function flatFor({ view }, layer, head) {
  const data = view.layers.get(layer);
  if (!data) return null;
  if (head === "mean") return mapView(data.average);
  if (head === "rollout") return data.rollout ? mapView(data.rollout) : null; // null: not computed
  return mapView(data.heads, Number(head) - 1);
}

export const zmaxFor = ({ state }, flat) => (state.scale === "fixed" ? 1 : Math.max(mapMax(flat), 1e-6));

/** What a map greys: the causal triangle, and beyond the layer's sliding window (not in
 * the rollout, which reaches further through earlier layers). */
export function maskOf({ view }, layer, head) {
  const { info, meta } = view;
  const windowed = head !== "rollout" && info.sliding_windows;
  const slidingWindow = (windowed && info.sliding_windows[layer - 1]) || null;
  return { causal: info.causal, slidingWindow, positions: meta.positions || null };
}

/** How a thumbnail is drawn a pixel a cell (a pooled map, the log scale, the sink apart, the atlas). */
function thumbOptions(page, flat, layer, head) {
  const { meta } = page.view;
  const { state } = page;
  const T = meta.tokens.length;
  const [rows, cols] = meta.pooled ? meta.pooled.shape : [T, T];
  const block = meta.pooled ? meta.pooled.block : [1, 1];
  const zmax = rangeTop(flat, cols, { fixed: state.scale === "fixed", sinkApart: state.sinkApart });
  return { rows, cols, block, T, zmax, log: state.scale === "log", ...maskOf(page, layer, head) };
}

/** The server left the rollout out (a long text): said on the button, not grey forever. */
function markAbsent(button, layer, head) {
  button.classList.remove("pending");
  button.classList.add("absent");
  button.title = `${mapName(layer, head)}: not computed for this text`;
}

/** Paint one thumbnail. */
function paint(page, g, button, flat, layer, head) {
  const { state, view } = page;
  const T = view.meta.tokens.length;
  button.classList.remove("absent");
  button.title = mapName(layer, head);
  if (g.atlas) g.atlas.paint(button, flat, thumbOptions(page, flat, layer, head));
  else if (view.overview || state.scale === "log" || state.sinkApart) drawCells(button.firstChild, flat, thumbOptions(page, flat, layer, head));
  else drawMap(button.firstChild, flat, T, zmaxFor(page, flat), maskOf(page, layer, head));
  button.classList.remove("pending");
  button.dataset.tokens = String(T);
}

function drawRow(page, g, layer) {
  for (const head of gridColumns(page.view.info.heads)) {
    const button = g.buttons.get(gridKey(layer, head));
    const flat = flatFor(page, layer, head);
    if (button && !flat && head === "rollout" && page.view.layers.has(layer)) markAbsent(button, layer, head);
    else if (button && flat) paint(page, g, button, flat, layer, head);
  }
  if (g.atlas) g.atlas.flush();
}

function markSelected({ state }, g) {
  const button = g.buttons.get(gridKey(state.layer, state.head)) || null;
  if (button === g.selected) return;
  if (g.selected) {
    g.selected.setAttribute("aria-pressed", "false");
    g.selected.tabIndex = -1;
  }
  g.selected = button;
  if (button) {
    button.setAttribute("aria-pressed", "true");
    button.tabIndex = 0;
  }
}

/** The arrow keys move between thumbnails (past the layers the filter hides). */
function onArrow(page, g, ev, select) {
  const move = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[ev.key];
  const target = ev.target.closest(".map-btn");
  const { info } = page.view;
  if (!move || !target || !info) return;
  ev.preventDefault();
  const cols = gridColumns(info.heads);
  let layer = Number(target.dataset.layer);
  for (let l = layer + move[0]; move[0] && l >= 1 && l <= info.layers; l += move[0]) {
    if (g.filter.shows(l)) {
      layer = l;
      break;
    }
  }
  const col = Math.min(cols.length - 1, Math.max(0, cols.indexOf(target.dataset.head) + move[1]));
  select(layer, cols[col], true);
}

/** The pooled overview's note above the grid. */
function overviewText(meta) {
  const [b] = meta.pooled.block;
  const T = meta.tokens.length;
  return `${T} tokens: each thumbnail is pooled, a cell the largest weight of a ${b} × ${b} block of token pairs. Open a map (click, or Enter) for it at full resolution, and drag across it to zoom into a region. Choose a token (in the list, or click a row of the large map) for its row in every head, asked for at full resolution.`;
}

/**
 * Mount the grid card over the page; select(layer, head, focus) opens a map (the
 * page's, so the zoom and token cards follow).  Returns {prepare(info, meta),
 * drawRow(n), redraw(), markSelected(), shows(l), done(drawn)}.
 */
export function mountMaps(page, { select }) {
  const grid = page.$("head-grid");
  const g = { buttons: new Map(), selected: null, atlas: null, filter: null };
  const note = el("p", { class: "hint", "data-testid": "overview-note", hidden: true });
  grid.before(note);
  g.filter = layerFilter(grid, () => {
    if (g.atlas) g.atlas.layout();
    if (g.filter.shows(page.state.layer)) return;
    const first = [...g.buttons.values()].find((b) => !b.hidden);
    if (first) select(Number(first.dataset.layer), first.dataset.head);
  });
  grid.addEventListener("keydown", (ev) => onArrow(page, g, ev, select));
  return {
    /** New maps arrive: the grid for their model (kept when the same), every map pending. */
    prepare(info, meta) {
      if (grid.dataset.model !== info.name || !g.buttons.size) {
        g.buttons = buildHeadGrid(grid, info.layers, info.heads, (l, head) => select(l, head, true));
        grid.dataset.model = info.name;
        g.atlas = usesAtlas(info.layers, info.heads) ? thumbAtlas(grid, g.buttons) : null;
        if (g.atlas) g.atlas.layout();
        g.selected = null;
        g.filter.refresh();
      }
      grid.dataset.overview = String(page.view.overview);
      note.hidden = !page.view.overview;
      if (page.view.overview) note.textContent = overviewText(meta);
    },
    pending() {
      markSelected(page, g);
      for (const button of g.buttons.values()) button.classList.add("pending");
    },
    drawRow: (layer) => drawRow(page, g, layer),
    redraw() {
      for (const layer of page.view.layers.keys()) drawRow(page, g, layer);
    },
    markSelected: () => markSelected(page, g),
    focus: (layer, head) => g.buttons.get(gridKey(layer, head))?.focus(),
    shows: (l) => g.filter.shows(l),
  };
}
