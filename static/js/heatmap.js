// Plotly drawing: newPlot once per div, Plotly.react after that, with the
// project's colour scales, escaped labels and PNG/SVG export on every plot.

import { escapePlotly, tickLabel } from "./labels.js";

// ColorBrewer RdBu (colour-blind safe), negative = blue, positive = red, white at 0.
export const DIVERGING = [
  [0, "#0571b0"],
  [0.25, "#92c5de"],
  [0.5, "#f7f7f7"],
  [0.75, "#f4a582"],
  [1, "#ca0020"],
];
export const SEQUENTIAL = "Viridis";

const FONT = { family: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size: 12 };
const SVG_ICON = {
  width: 1000,
  height: 1000,
  path: "M100 100h600l200 200v600h-800zM200 200v600h600v-450l-150-150zM300 500h400v80h-400zM300 650h400v80h-400z",
};

let firstDrawMarked = false;

function markFirstDraw() {
  if (firstDrawMarked) return;
  firstDrawMarked = true;
  performance.mark("first-heatmap");
}

/**
 * window.Plotly, once plotly.min.js has run. Pages that open with plots have it in
 * <head> with `async` (their API requests run while it is parsed); on the others
 * (the model page, whose grid is canvas) the first plot adds the script here.
 * Each call listens for itself, as the draws of a page are independent.
 */
export function plotlyReady() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  let script = document.getElementById("plotly-js");
  if (!script) {
    script = document.createElement("script");
    script.id = "plotly-js";
    script.async = true;
    script.src = document.body.dataset.plotlySrc;
    script.addEventListener("load", () => performance.mark("plotly-ready"), { once: true });
    script.addEventListener("error", () => script.remove(), { once: true }); // the next plot retries
    document.head.append(script);
  }
  return new Promise((resolve, reject) => {
    script.addEventListener("load", () => resolve(window.Plotly), { once: true });
    script.addEventListener("error", () => reject(new Error("plotly.min.js did not load")), { once: true });
  });
}

// Where <head> already asked for it, note when it is ready (bench/ reads the mark).
if (document.getElementById("plotly-js")) plotlyReady().then(() => performance.mark("plotly-ready"), () => {});

function plotConfig(Plotly, filename) {
  return {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
    toImageButtonOptions: { format: "png", filename, scale: 2 },
    modeBarButtonsToAdd: [
      {
        name: "downloadSvg",
        title: "Download plot as SVG",
        icon: (Plotly.Icons && Plotly.Icons.disk) || SVG_ICON,
        click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename }),
      },
    ],
  };
}

/** newPlot the first time a div is drawn, Plotly.react afterwards (keeps zoom via uirevision). */
export async function drawFigure(div, data, layout, filename = "attention-viz") {
  const Plotly = await plotlyReady();
  const fullLayout = {
    font: FONT,
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "#ffffff",
    margin: { l: 10, r: 10, t: 10, b: 10 },
    ...layout,
  };
  if (div.dataset.plotted === "1") {
    await Plotly.react(div, data, fullLayout, plotConfig(Plotly, filename));
  } else {
    div.dataset.plotted = "1";
    await Plotly.newPlot(div, data, fullLayout, plotConfig(Plotly, filename));
  }
  div.dataset.revision = String(Number(div.dataset.revision || 0) + 1);
  markFirstDraw();
  return div;
}

function maxAbs(z) {
  let m = 0;
  for (const row of z) for (const v of row) if (v !== null && Math.abs(v) > m) m = Math.abs(v);
  return m;
}

function format(v) {
  if (v === null || v === undefined) return "−∞ (masked)";
  const a = Math.abs(v);
  return a !== 0 && (a < 0.001 || a >= 10000) ? v.toExponential(3) : v.toFixed(4);
}

/** Column ticks: every one up to 24, else every n-th so that about 16 are labelled. */
function everyNth(n) {
  const step = n <= 24 ? 1 : Math.ceil(n / 16);
  return Array.from({ length: Math.ceil(n / step) }, (_, i) => i * step);
}

/**
 * A labelled heatmap.
 * opts: z (rows × cols, null = masked), rows, cols (plain-text labels: shortened
 * on the axes, whole in the hover text; escaped for Plotly here), kind
 * ("signed" | "weights"), rowTitle, colTitle, zmin/zmax (weights), filename,
 * highlightRows (row indices to outline), uirevision.
 */
export function drawHeatmap(div, opts) {
  const { z, rows, cols, kind = "signed", rowTitle = "", colTitle = "" } = opts;
  const rowsEsc = rows.map(escapePlotly);
  const colsEsc = cols.map(escapePlotly);
  const rowName = escapePlotly(rowTitle || "row");
  const colName = escapePlotly(colTitle || "column");
  const text = z.map((row, i) =>
    row.map((v, j) => `${rowName}: ${rowsEsc[i]}<br>${colName}: ${colsEsc[j]}<br>value: ${format(v)}`),
  );
  // Numbers in the cells only when a cell is wide and tall enough to hold "-0.00".
  const longest = Math.max(...rows.map((r) => Math.min(Array.from(r).length, 14)), 1);
  const plotWidth = (div.clientWidth || 320) - 110 - 6.5 * longest;
  const small = rows.length <= 12 && plotWidth / Math.max(cols.length, 1) >= 36;
  const trace = {
    type: "heatmap",
    z,
    x: cols.map((_, j) => j),
    y: rows.map((_, i) => i),
    text,
    hovertemplate: "%{text}<extra></extra>",
    hoverongaps: false,
    // Gaps separate a few cells; on a 256-wide row they would leave no colour at all.
    xgap: cols.length <= 40 ? 1 : 0,
    ygap: rows.length <= 40 ? 1 : 0,
    colorbar: { thickness: 10, len: 0.9, outlinewidth: 0, tickfont: { size: 10 } },
  };
  if (small) {
    trace.texttemplate = "%{z:.2f}";
    trace.textfont = { size: cols.length > 8 ? 9 : 11 };
  }
  if (kind === "weights") {
    Object.assign(trace, { colorscale: SEQUENTIAL, zmin: opts.zmin ?? 0, zmax: opts.zmax ?? 1 });
  } else {
    const m = opts.zrange || maxAbs(z) || 1;
    Object.assign(trace, { colorscale: DIVERGING, zmid: 0, zmin: -m, zmax: m });
  }
  const rowPx = Math.max(22, Math.min(40, 300 / Math.max(rows.length, 1)));
  const height = Math.round(Math.max(200, Math.min(560, 90 + rows.length * rowPx)));
  const shapes = (opts.highlightRows || []).map((i) => ({
    type: "rect",
    xref: "paper",
    x0: 0,
    x1: 1,
    yref: "y",
    y0: i - 0.5,
    y1: i + 0.5,
    line: { color: "#111", width: 2 },
  }));
  const layout = {
    height,
    uirevision: opts.uirevision ?? "keep",
    shapes,
    xaxis: {
      tickmode: "array",
      tickvals: everyNth(cols.length),
      ticktext: everyNth(cols.length).map((j) => escapePlotly(tickLabel(cols[j]))),
      title: { text: colName, standoff: 6, font: { size: 11 } },
      automargin: true,
      showgrid: false,
      zeroline: false,
      side: "bottom",
    },
    yaxis: {
      tickmode: "array",
      tickvals: rows.map((_, i) => i),
      ticktext: rows.map((r) => escapePlotly(tickLabel(r))),
      title: { text: rowName, standoff: 6, font: { size: 11 } },
      autorange: "reversed",
      automargin: true,
      showgrid: false,
      zeroline: false,
    },
  };
  return drawFigure(div, [trace], layout, opts.filename || "attention-viz");
}
