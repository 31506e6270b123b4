// Drawing figures. Every figure is a Plotly figure (data + layout); it is drawn
// at once by the quick renderers (canvas/SVG, no Plotly), and replaced in place
// by Plotly itself when a reader reaches for that plot (hover, touch, focus),
// which loads Plotly the first time. While a Plotly figure is in use, changes go
// through Plotly.react; a figure whose inputs did not change is not redrawn.
//
// Marks for bench/: "first-heatmap" (first figure on screen), "plot-drawn"
// (after every draw, detail = the plot's test id), "plotly-ready", "first-plotly".

import { DIVERGING } from "./colour.js";
import { escapePlotly, tickLabel } from "./labels.js";
import { plotlyReady } from "./plotly-loader.js";
import { drawQuickChart } from "./quick-chart.js";
import { drawQuickHeatmap } from "./quick-heatmap.js";

export { plotlyReady };

const SEQUENTIAL = "Viridis"; // Plotly's name for colour.js's VIRIDIS

const FONT = { family: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size: 12 };
const SVG_ICON = {
  width: 1000,
  height: 1000,
  path: "M100 100h600l200 200v600h-800zM200 200v600h600v-450l-150-150zM300 500h400v80h-400zM300 650h400v80h-400z",
};

// The last figure asked for, per plot div: what an upgrade to Plotly draws.
const figures = new Map();
// drawHeatmap's options per div, to redraw on a resize or a colour-range switch.
const heatmaps = new Map();
let firstDrawMarked = false;
let firstPlotlyMarked = false;

function markDrawn(div) {
  if (!firstDrawMarked) {
    firstDrawMarked = true;
    performance.mark("first-heatmap");
  }
  performance.mark("plot-drawn", { detail: div.dataset.testid || "" });
}

// One config object per file name: Plotly.react compares configs, and any new
// object (a new click function) would make it rebuild the plot from scratch.
const configs = new Map();

function plotConfig(Plotly, filename) {
  if (!configs.has(filename)) configs.set(filename, newConfig(Plotly, filename));
  return configs.get(filename);
}

function newConfig(Plotly, filename) {
  return {
    responsive: true,
    displaylogo: false,
    // Nothing leaves the machine: no "Share chart..." (Plotly Cloud) button.
    showSendToCloud: false,
    showEditInChartStudio: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "sendChartToCloud"],
    toImageButtonOptions: { format: "png", filename, scale: 2 },
    modeBarButtonsToAdd: [
      {
        name: "downloadSvg",
        title: "Download plot as SVG",
        icon: (Plotly.Icons && Plotly.Icons.disk) || SVG_ICON,
        click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename }),
      },
      "downloadjson",
    ],
  };
}

// ---------- Plotly ----------

/** Plotly events asked for on a plot, kept so that every Plotly figure the div gets has them. */
function keepHandlers(div, real = null) {
  div.on = (event, fn) => {
    (div._handlers ||= []).push([event, fn]);
    return real ? real(event, fn) : div;
  };
}

/** A Plotly figure that a reader is using: under the pointer, holding focus, or zoomed. */
function inUse(div) {
  return div.matches(":hover") || div.contains(document.activeElement) || Boolean(div._zoomed);
}

async function drawWithPlotly(Plotly, div, fig) {
  if (div.dataset.renderer === "plotly") {
    await Plotly.react(div, fig.data, fig.layout, plotConfig(Plotly, fig.filename));
    return;
  }
  // In place of the quick figure, in the same task (no blank frame between).
  delete div.on;
  delete div.data;
  delete div.layout;
  div.replaceChildren();
  div.dataset.renderer = "plotly";
  div.dataset.plotted = "1";
  await Plotly.newPlot(div, fig.data, fig.layout, plotConfig(Plotly, fig.filename));
  const real = div.on.bind(div);
  div._zoomed = false;
  real("plotly_relayout", (ev) => {
    const keys = Object.keys(ev || {});
    if (keys.some((k) => /axis\d*\.range/.test(k))) div._zoomed = true;
    if (keys.some((k) => /axis\d*\.autorange/.test(k))) div._zoomed = false;
  });
  const handlers = div._handlers || [];
  div._handlers = [];
  keepHandlers(div, real);
  for (const [event, fn] of handlers) div.on(event, fn);
  if (!firstPlotlyMarked) {
    firstPlotlyMarked = true;
    performance.mark("first-plotly");
  }
}

/** Reached for (hover, touch, focus): load Plotly and let it take over this plot. */
async function upgrade(div) {
  try {
    const Plotly = await plotlyReady();
    if (div.dataset.renderer === "quick" && div.isConnected && figures.has(div)) {
      await drawWithPlotly(Plotly, div, figures.get(div));
    }
  } catch {
    // Plotly could not be loaded: the quick figure stays, and the next reach retries.
  }
}

function watchForIntent(div) {
  if (div._watched) return;
  div._watched = true;
  const want = () => {
    if (div.dataset.renderer === "quick") upgrade(div);
  };
  div.addEventListener("pointerover", want, { passive: true });
  div.addEventListener("touchstart", want, { passive: true });
  div.addEventListener("focusin", want);
}

// ---------- quick ----------

function drawQuick(div, fig, width) {
  if (div.dataset.renderer === "plotly") window.Plotly.purge(div);
  const w = fig.layout.width || width || plotWidth(div) || 320;
  if (fig.data.every((t) => t.type === "heatmap")) drawQuickHeatmap(div, fig.data[0], fig.layout, w);
  else drawQuickChart(div, fig.data, fig.layout, w);
  div.dataset.renderer = "quick";
  // What is drawn, where Plotly keeps it too (tests and the console read div.data).
  div.data = fig.data;
  div.layout = fig.layout;
  keepHandlers(div); // attached when Plotly takes over
  watchForIntent(div);
}

/**
 * Draw a Plotly figure into `div`. A Plotly figure in use (hovered, focused or
 * zoomed) is updated with Plotly.react; every other figure is drawn at once by
 * the quick renderer (a Plotly figure not in use gives way to it: Plotly.react
 * costs 15-40 ms a plot, the quick renderer 1-3 ms), and Plotly takes over again
 * when the reader reaches for it. `width` (optional) is the div's width, read by
 * the caller with others'.
 */
export async function drawFigure(div, data, layout, filename = "attention-viz", width = undefined) {
  const fig = {
    data,
    layout: {
      font: FONT,
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "#ffffff",
      margin: { l: 10, r: 10, t: 10, b: 10 },
      ...layout,
    },
    filename,
  };
  figures.set(div, fig);
  div.classList.toggle("wide", Boolean(fig.layout.width));
  if (window.Plotly && div.dataset.renderer === "plotly" && inUse(div)) await drawWithPlotly(window.Plotly, div, fig);
  else drawQuick(div, fig, width);
  div.dataset.revision = String(Number(div.dataset.revision || 0) + 1);
  markDrawn(div);
  return div;
}

// ---------- heatmaps ----------

let weightRange = "fixed";

/** How weight maps are coloured: "fixed" (0 to 1) or "fitted" (the data's own range). */
export function getWeightRange() {
  return weightRange;
}

/** Switch the weight maps' colour range and redraw them (only those). */
export function setWeightRange(mode) {
  weightRange = mode === "fitted" ? "fitted" : "fixed";
  for (const select of document.querySelectorAll("[data-weight-range]")) select.value = weightRange;
  const draws = [];
  for (const [div, opts] of heatmaps) {
    if (!div.isConnected) heatmaps.delete(div);
    else if (opts.kind === "weights") draws.push(drawHeatmap(div, opts));
  }
  return Promise.all(draws);
}

function dataRange(z) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const row of z) {
    for (const v of row) {
      if (v === null || v === undefined) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  return lo <= hi ? [lo, hi] : [0, 1];
}

function format(v) {
  if (v === null || v === undefined) return "−∞ (masked)";
  const a = Math.abs(v);
  return a !== 0 && (a < 0.001 || a >= 10000) ? v.toExponential(3) : v.toFixed(4);
}

const rangeText = (v) => (Math.abs(v) >= 0.01 || v === 0 ? v.toFixed(3) : v.toExponential(1));

/** Every index up to `max`; above, every n-th so that about 16 are labelled. */
function tickIndices(n, thin) {
  const step = n <= (thin ? 24 : 64) ? 1 : Math.ceil(n / 16);
  return Array.from({ length: Math.ceil(n / step) }, (_, i) => i * step);
}

const labelFont = (count) => (count <= 16 ? 12 : count <= 32 ? 10 : 9);
// Rough width of a label in px (system-ui digits and lower case ≈ 0.6 em).
const labelPx = (label, size) => Array.from(label).length * size * 0.6;

/**
 * The Plotly figure of a labelled heatmap, `width` pixels wide. Every token is
 * labelled (up to 64): the font shrinks, the plot grows taller, and x labels
 * turn vertical when they do not fit; past what the width can hold, every few
 * columns are labelled: the plot always fits its panel.
 */
export function heatmapFigure(opts, width, range = weightRange) {
  const { z, rows, cols, rowTitle = "", colTitle = "" } = opts;
  const names = { row: escapePlotly(rowTitle || "row"), col: escapePlotly(colTitle || "column") };
  const y = rowLabels(rows);
  const plotW = Math.max(40, width - (30 + y.labelW + 80)); // axis title, y labels, colour bar
  const x = columnLabels(cols, plotW, Boolean(opts.thinCols));
  const trace = heatmapTrace(z, hoverText(z, rows, cols, names), [rows.length, cols.length], plotW);
  Object.assign(trace, opts.kind === "weights" ? weightScale(opts, z, range) : signedScale(opts, z));
  const layout = {
    height: heatmapHeight(rows.length, y.font, x),
    uirevision: opts.uirevision ?? "keep",
    shapes: (opts.highlightRows || []).map(rowOutline),
    xaxis: {
      ...labelledAxis(x, names.col),
      tickangle: x.vertical ? -90 : 0,
      side: "bottom",
    },
    yaxis: { ...labelledAxis(y, names.row), autorange: "reversed" },
  };
  return { data: [trace], layout };
}

/** Each cell's hover text: its row, its column (whole labels) and its value. */
function hoverText(z, rows, cols, names) {
  const rowsEsc = rows.map(escapePlotly);
  const colsEsc = cols.map(escapePlotly);
  return z.map((row, i) => row.map((v, j) => `${names.row}: ${rowsEsc[i]}<br>${names.col}: ${colsEsc[j]}<br>value: ${format(v)}`));
}

/** The rows' ticks: every row up to 64, else about 16; their labels, font size and widest label. */
function rowLabels(rows) {
  const ticks = tickIndices(rows.length, false);
  const text = ticks.map((i) => tickLabel(rows[i]));
  const font = labelFont(ticks.length);
  return { ticks, text, font, labelW: Math.max(0, ...text.map((t) => labelPx(t, font))) };
}

/**
 * The columns' ticks for a plot plotW wide. The map always fits its panel: when the
 * columns are too narrow for a label each, only every few columns are labelled (the
 * hover text names every one); labels wider than their columns turn vertical.
 */
function columnLabels(cols, plotW, thin) {
  const m = cols.length;
  const cellW = plotW / Math.max(m, 1);
  const first = tickIndices(m, thin);
  let step = first.length > 1 ? first[1] - first[0] : 1;
  while (step < m && cellW * step < labelFont(Math.ceil(m / step)) + 3) step++;
  const ticks = Array.from({ length: Math.ceil(m / step) }, (_, i) => i * step);
  const font = labelFont(ticks.length);
  const text = ticks.map((j) => tickLabel(cols[j]));
  const labelW = Math.max(0, ...text.map((t) => labelPx(t, font)));
  return { ticks, text, font, labelW, vertical: labelW + 4 > cellW * step };
}

/** The heatmap trace (n rows, m columns) without its colour scale: cells, hover, gaps, and numbers where they fit. */
function heatmapTrace(z, text, [n, m], plotW) {
  const trace = {
    type: "heatmap",
    z,
    x: Array.from({ length: m }, (_, j) => j),
    y: Array.from({ length: n }, (_, i) => i),
    text,
    hovertemplate: "%{text}<extra></extra>",
    hoverongaps: false,
    // Gaps separate a few cells; on a 256-wide row they would leave no colour at all.
    xgap: m <= 40 ? 1 : 0,
    ygap: n <= 40 ? 1 : 0,
    colorbar: colourBar(),
  };
  // Numbers in the cells only when a cell is wide and tall enough to hold "-0.00".
  if (n <= 12 && plotW / Math.max(m, 1) >= 36) {
    trace.texttemplate = "%{z:.2f}";
    trace.textfont = { size: m > 8 ? 9 : 11 };
  }
  return trace;
}

/** The colour bar's style, and its title when there is one. */
function colourBar(title = null) {
  const bar = { thickness: 10, len: 0.9, outlinewidth: 0, tickfont: { size: 10 } };
  if (title !== null) bar.title = { text: title, side: "right", font: { size: 10 } };
  return bar;
}

/** Weights in Viridis: 0–1 (or the caller's zmin/zmax), or the data's own range when fitted. */
function weightScale(opts, z, range) {
  let [lo, hi] = [opts.zmin ?? 0, opts.zmax ?? 1];
  let title = opts.scaleTitle ?? "0–1 fixed";
  if (range === "fitted" && opts.zmin === undefined && opts.zmax === undefined) {
    [lo, hi] = dataRange(z);
    if (hi - lo < 1e-12) [lo, hi] = [lo - 1e-6, hi + 1e-6];
    title = `fitted: ${rangeText(lo)}–${rangeText(hi)}`;
  }
  return { colorscale: SEQUENTIAL, zmin: lo, zmax: hi, colorbar: colourBar(title) };
}

/** Signed values on the diverging scale, symmetric about 0 (the caller's zrange, or the largest |value|). */
function signedScale(opts, z) {
  const [lo, hi] = dataRange(z);
  const mabs = opts.zrange || Math.max(Math.abs(lo), Math.abs(hi)) || 1;
  const scale = { colorscale: DIVERGING, zmid: 0, zmin: -mabs, zmax: mabs };
  if (opts.scaleTitle) scale.colorbar = colourBar(opts.scaleTitle);
  return scale;
}

/** Tall enough for each row's label, and for vertical column labels. */
function heatmapHeight(n, rowFont, x) {
  const rowPx = Math.max(rowFont + 2, Math.min(40, 300 / Math.max(n, 1)));
  const extra = x.vertical ? Math.max(0, x.labelW - 14) : 0;
  return Math.round(Math.max(260, 90 + n * rowPx + extra));
}

/** A black outline around row i, across the plot. */
function rowOutline(i) {
  return { type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: i - 0.5, y1: i + 0.5, line: { color: "#111", width: 2 } };
}

/** An axis labelled at the given ticks, with a title. */
function labelledAxis(labels, title) {
  return {
    tickmode: "array",
    tickvals: labels.ticks,
    ticktext: labels.text.map(escapePlotly),
    tickfont: { size: labels.font },
    title: { text: title, standoff: 6, font: { size: 11 } },
    automargin: true,
    showgrid: false,
    zeroline: false,
  };
}

const lastKey = new WeakMap();

/**
 * A labelled heatmap.
 * opts: z (rows × cols, null = masked), rows, cols (plain-text labels: shortened
 * on the axes, whole in the hover text; escaped for Plotly here), kind
 * ("signed" | "weights"), rowTitle, colTitle, zmin/zmax (weights; else the page's
 * colour range, fixed 0–1 or fitted), zrange (signed), filename,
 * highlightRows (row indices to outline), uirevision, thinCols (label about 16
 * columns when there are more than 24, e.g. dimensions), width (the div's width,
 * when the caller read it with others').
 * Resolves once drawn; a call with the same inputs as the last draw draws nothing.
 */
export function drawHeatmap(div, opts) {
  const width = opts.width || plotWidth(div) || 320;
  heatmaps.set(div, opts);
  const key = JSON.stringify([opts.z, opts.rows, opts.cols, opts.kind, opts.rowTitle, opts.colTitle, opts.zmin, opts.zmax, opts.zrange, opts.highlightRows, opts.thinCols, opts.kind === "weights" ? weightRange : "", Math.round(width)]);
  if (lastKey.get(div) === key && div.dataset.renderer) return Promise.resolve(div);
  lastKey.set(div, key);
  const { data, layout } = heatmapFigure(opts, width);
  return drawFigure(div, data, layout, opts.filename || "attention-viz", width);
}

// ---------- sizes and visibility, without forcing a layout ----------

// Each plot's width and whether it is near the viewport, kept up to date by
// observers (which report after the browser's own layout): a redraw reads these
// instead of clientWidth/getBoundingClientRect, which would force a layout
// between one plot's write and the next one's read.
const widths = new WeakMap();
const visible = new WeakMap();
const resized = new Set();
let resizeTimer = null;

const sizeObserver = new ResizeObserver((entries) => {
  for (const entry of entries) {
    const width = entry.contentRect.width;
    const before = widths.get(entry.target);
    widths.set(entry.target, width);
    if (before !== undefined && Math.abs(before - width) >= 1) resized.add(entry.target);
  }
  if (!resized.size) return;
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(redrawResized, 150);
});

const viewObserver = new IntersectionObserver(
  (entries) => {
    for (const entry of entries) visible.set(entry.target, entry.isIntersecting);
  },
  { rootMargin: "200px 0px" },
);

function observe(div) {
  if (widths.has(div)) return;
  widths.set(div, div.clientWidth);
  sizeObserver.observe(div);
  viewObserver.observe(div);
}

/** The plot div's width in CSS pixels (one forced layout the first time, then from the observer). */
export function plotWidth(div) {
  observe(div);
  return widths.get(div);
}

/** Whether the plot is in (or within 200 px of) the viewport; unknown before its first draw counts as yes. */
export function plotInView(div) {
  return visible.get(div) ?? true;
}

// A new width redraws the quick figures and re-fits every heatmap's labels; a Plotly figure
// is resized to its div (Plotly's `responsive` follows the window only, not a card that
// narrows with it or without it).
function redrawResized() {
  const divs = [...resized].filter((d) => d.isConnected && !d.hidden && figures.has(d));
  resized.clear();
  for (const div of divs) {
    const width = widths.get(div);
    if (heatmaps.has(div)) drawHeatmap(div, { ...heatmaps.get(div), width });
    else if (div.dataset.renderer === "quick") drawQuick(div, figures.get(div), width);
    else if (div.dataset.renderer === "plotly" && window.Plotly) window.Plotly.Plots.resize(div);
  }
}

// ---------- the page-wide bits ----------

// Any <select data-weight-range> on the page switches the weight maps' colour range.
for (const select of document.querySelectorAll("[data-weight-range]")) {
  select.value = weightRange;
  select.addEventListener("change", () => setWeightRange(select.value));
}
