// /model's zoom card: the map chosen in the grid, large.  A short text's map as a
// Plotly (quick) plot with token labels; a long text's (fetched at full resolution, or
// a region), the log scale or the sink apart on a canvas (model-overview.js).  Its
// legend, the link to the head's steps in the explorer, the export bar, a click on a row
// choosing that token, and the chosen tokens' rows outlined (model-row-marks.js).
// Mounted over the page (model-page.js).

import { rangeTop } from "./colour.js";
import { tokenLabels } from "./labels.js";
import { mountExport } from "./model-export.js";
import { mapName } from "./model-grid.js";
import { chosenTokens } from "./model-multi-token.js";
import { flatFor, maskOf, zmaxFor } from "./model-maps-card.js";
import { canvasZoom, cropMap, fetchMap } from "./model-overview.js";
import { drawZoom } from "./model-plots.js";
import { URL_LIMIT, realHeadLink } from "./model-state.js";
import { rowFor } from "./model-token-view.js";

/** The legend under the large map: the grey (masked, beyond a window), the written tokens. */
function legendText({ view }, layer, head) {
  const { info, meta } = view;
  const parts = [];
  if (info.causal) parts.push("Grey: masked, a token cannot read the tokens after it.");
  const { slidingWindow } = maskOf({ view }, layer, head);
  if (info.causal && slidingWindow) parts.push(`This layer reads a sliding window of ${slidingWindow} tokens: the grey below the diagonal is beyond it.`);
  if (meta.generated && meta.generated.includes(true)) parts.push("▸ and the orange outline: tokens the model wrote.");
  return parts.join(" ");
}

/** The link from the large map's head to its steps in the explorer (or why there is none). */
function updateOpenHead({ $, state, view }) {
  const link = $("open-head");
  const note = $("open-head-note");
  const { shown, meta, info } = view;
  if (!shown || !/^\d+$/.test(state.head)) {
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

/** What the large plot now shows (tests and the curious read these). */
function markShown(zoom, layer, head, T) {
  zoom.dataset.layer = String(layer);
  zoom.dataset.head = head;
  zoom.dataset.tokens = String(T);
}

/** The rows of the chosen tokens (as the token view reads them: a written token's is the
 * row before it), to mark on the large map. */
function markedRows({ state, view }) {
  const { info, meta } = view;
  const rows = chosenTokens(state).map((s) => rowFor({ s, generated: meta.generated || null, positions: meta.positions, when: state.when, causal: info.causal, count: meta.tokens.length }).query);
  return rows.filter((q) => q !== null && q < meta.tokens.length);
}

/** The large map on canvas: long texts (fetched at full resolution), the log scale, the sink apart. */
function showCanvas(page, zoomCanvas, choose) {
  const { state, view } = page;
  const { layer, head } = state;
  const T = view.meta.tokens.length;
  const full = view.overview ? null : flatFor(page, layer, head);
  const request = view.mapRequest;
  zoomCanvas.show({
    key: `${layer}-${head}`,
    T,
    tokens: tokenLabels(view.meta.tokens),
    mask: maskOf(page, layer, head),
    load: (rows, cols) => (full ? Promise.resolve(cropMap(full, T, rows, cols)) : fetchMap({ request, layer, head, rows, cols, T })),
    pick: (row) => choose(row),
    colour: (map) => ({
      zmax: rangeTop(map.values, map.cols, { fixed: state.scale === "fixed", sinkApart: state.sinkApart, firstCol: map.region.cols[0] }),
      log: state.scale === "log",
    }),
  });
  zoomCanvas.mark(markedRows(page));
  markShown(page.$("zoom-plot"), layer, head, T);
}

/** The large map of the page's layer and head. */
function drawSelected(page, zoomCanvas, choose) {
  const { $, state, view } = page;
  if (!view.meta) return;
  const flat = flatFor(page, state.layer, state.head);
  $("zoom-title").textContent = mapName(state.layer, state.head);
  updateOpenHead(page);
  const zoom = $("zoom-plot");
  const onCanvas = view.overview || state.scale === "log" || state.sinkApart;
  const absent = !flat && view.layers.has(state.layer) && state.head === "rollout"; // left out by the server
  zoom.hidden = onCanvas || absent;
  zoomCanvas.element.hidden = !onCanvas || absent;
  const legend = $("zoom-legend");
  if (absent) {
    legend.hidden = false;
    legend.textContent = "The server did not compute the rollout for this text (it does not for long texts): open a head or the mean of heads.";
    return;
  }
  if (!flat) return;
  const { layer, head } = state;
  legend.textContent = legendText(page, layer, head);
  legend.hidden = legend.textContent === "";
  if (onCanvas) return showCanvas(page, zoomCanvas, choose);
  const { tokens, generated } = view.meta;
  drawZoom(zoom, { flat, tokens, zmax: zmaxFor(page, flat), filename: `model-layer${layer}-${head}`, readout: $("zoom-readout"), ...maskOf(page, layer, head), generated: generated || null, marked: markedRows(page) }).then(() =>
    markShown(zoom, layer, head, tokens.length),
  );
}

/**
 * Mount the zoom card over the page; choose(row) picks a token (the token card's).
 * Returns {draw(), redraw()}: draw the page's map; the colours changed (a pooled
 * overview's large map keeps its region and is drawn again from what it holds).
 */
export function mountZoom(page, { choose }) {
  const { $, view } = page;
  const zoomCanvas = canvasZoom($("zoom-plot"), $("zoom-readout"));
  $("zoom-plot").after(zoomCanvas.element);
  mountExport($("zoom-readout"), {
    request: () => view.mapRequest,
    zoom: {
      canvas: () => (zoomCanvas.element.hidden ? null : zoomCanvas.element.querySelector("canvas")),
      plot: () => $("zoom-plot"),
      title: () => $("zoom-title").textContent,
      bar: () => zoomCanvas.element.querySelector("[data-testid='zoom-colour-bar']"),
    },
  });
  $("zoom-plot").addEventListener("click", (ev) => {
    const row = zoomRowAt(ev, $("zoom-plot"), view.meta);
    if (row !== null) choose(row);
  });
  return {
    draw: () => drawSelected(page, zoomCanvas, choose),
    /** The chosen tokens changed: their rows marked (a short text's map drawn again: 1-3 ms). */
    mark() {
      if (!view.meta) return;
      if (!zoomCanvas.element.hidden) zoomCanvas.mark(markedRows(page));
      else drawSelected(page, zoomCanvas, choose);
    },
    redraw() {
      if (view.overview) zoomCanvas.redraw();
      else drawSelected(page, zoomCanvas, choose);
    },
  };
}

/** The row under clientY in a box whose top and bottom edges are the rows [top, bottom] (in y units). */
function rowAt(box, [top, bottom], clientY) {
  if (clientY < box.top || clientY >= box.bottom) return null;
  return Math.round(top + ((clientY - box.top) / box.height) * (bottom - top));
}

/** Which token a click on the large map names: a row label, or the row of a cell. */
function zoomRowAt(ev, zoom, meta) {
  const target = ev.target instanceof Element ? ev.target : null;
  if (!target || !meta) return null;
  const T = meta.tokens.length;
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
