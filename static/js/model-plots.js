// Plotly figures of the model page: the large map and the cosine-per-layer line.
// drawFigure (heatmap.js) does newPlot once and Plotly.react afterwards.

import { drawFigure } from "./heatmap.js";
import { escapePlotly, tickLabel, tokenLabels } from "./labels.js";
import { MASKED_COLOUR, VIRIDIS, maskedCell } from "./colour.js";
import { toRows } from "./model-data.js";
import { markShapes } from "./model-row-marks.js";

// Above this many tokens, hover shows positions only (the readout under the
// plot names the tokens): T² hover strings would cost more than the map.
const HOVER_TEXT_MAX = 128;
// The tokens each large plot currently shows, for its hover readout.
const hoverTokens = new WeakMap();

function tickStep(T) {
  return T <= 48 ? 1 : Math.ceil(T / 24);
}

// Generated tokens carry this mark on the large map's axes (and their rows an outline).
export const GENERATED_MARK = "▸";

/** The large map's rows (nested arrays; masked cells of a causal map are null,
 * beyond a sliding window too: see maskedCell). */
export function zoomRows(flat, T, causal, slidingWindow = null, positions = null) {
  const z = toRows(flat, T);
  if (causal) for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) if (maskedCell(i, j, causal, slidingWindow, positions)) z[i][j] = null;
  return z;
}

const maskedText = (i, j) => (j > i ? "masked: a token cannot read later tokens" : "masked: beyond this layer's sliding window");

/** The large map's Plotly trace: cells, colours, and the hover text of each pair. */
function zoomTrace(z, esc, { T, zmax, causal }) {
  const idx = esc.map((_, i) => i);
  const trace = {
    type: "heatmap",
    z,
    x: idx,
    y: idx,
    colorscale: VIRIDIS,
    zmin: 0,
    zmax,
    hoverongaps: causal && T <= HOVER_TEXT_MAX,
    colorbar: { thickness: 10, len: 0.9, outlinewidth: 0, tickfont: { size: 10 }, title: { text: "weight", side: "right", font: { size: 11 } } },
  };
  if (T <= 40) Object.assign(trace, { xgap: 1, ygap: 1 });
  if (T <= HOVER_TEXT_MAX) {
    trace.text = z.map((row, i) => row.map((v, j) => `${esc[i]} → ${esc[j]}<br>${v === null ? maskedText(i, j) : `weight: ${v.toFixed(4)}`}`));
    trace.hovertemplate = "%{text}<extra></extra>";
  } else {
    trace.hovertemplate = "row %{y} → column %{x}<br>weight: %{z:.4f}<extra></extra>";
  }
  return trace;
}

/** The large map's layout: token ticks on both axes, the masked grey, the written rows outlined. */
function zoomLayout(div, { tokens, labels, generated, causal, marked }) {
  const T = tokens.length;
  const named = labels.map((l, i) => (generated && generated[i] ? `${GENERATED_MARK}${l}` : l));
  const step = tickStep(T);
  const ticks = labels.map((_, i) => i).filter((i) => i % step === 0);
  const fontSize = T <= 24 ? 11 : 9;
  const axis = (title) => ({
    tickmode: "array",
    tickvals: ticks,
    ticktext: ticks.map((i) => escapePlotly(tickLabel(named[i]))),
    tickfont: { size: fontSize },
    title: { text: title, standoff: 4, font: { size: 11 } },
    automargin: true,
    showgrid: false,
    zeroline: false,
  });
  const width = div.clientWidth || 480;
  const first = generated ? generated.indexOf(true) : -1;
  return {
    height: Math.round(Math.max(380, Math.min(680, width * 0.95))),
    uirevision: `${T}:${tokens.join("\u0000")}`,
    xaxis: { ...axis("attended to (key)"), side: "bottom", tickangle: -60 },
    yaxis: { ...axis("attending (query)"), autorange: "reversed" },
    // Masked cells are gaps in the heatmap: this grey shows through them.
    plot_bgcolor: causal ? MASKED_COLOUR : "#ffffff",
    shapes: [...(first >= 0 ? [{ type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: first - 0.5, y1: T - 0.5, line: { color: "#c2410c", width: 2 } }] : []), ...markShapes(marked)],
  };
}

/** The readout names the hovered pair in plain text (textContent: no escaping needed). */
function followHover(div, readout) {
  div.on("plotly_hover", (ev) => {
    const p = ev.points && ev.points[0];
    const names = hoverTokens.get(div);
    if (!p || !names) return;
    const value = p.z === null || p.z === undefined ? maskedText(p.y, p.x).replace(": ", " (") + ")" : Number(p.z).toFixed(4);
    readout.textContent = `${names[p.y]} (row ${p.y}) → ${names[p.x]} (column ${p.x}): ${value}`;
  });
  div.on("plotly_unhover", () => {
    readout.textContent = "";
  });
}

/**
 * The large map. opts: flat (Float32Array T×T), tokens (plain text), zmax,
 * filename (for export), readout (element that names the hovered pair),
 * causal (the upper triangle is masked: drawn grey, "masked" on hover),
 * generated (per token: written by the model; marked on the axes, rows outlined),
 * marked (the chosen tokens' rows, outlined: model-row-marks.js).
 */
export function drawZoom(div, { flat, tokens, zmax, filename, readout, causal = false, slidingWindow = null, positions = null, generated = null, marked = [] }) {
  const T = tokens.length;
  const z = zoomRows(flat, T, causal, slidingWindow, positions);
  const labels = tokenLabels(tokens);
  const trace = zoomTrace(z, labels.map(escapePlotly), { T, zmax, causal });
  const layout = zoomLayout(div, { tokens, labels, generated, causal, marked });
  div.dataset.causal = String(causal); // the quick map's masked cells take their grey from CSS
  div.dataset.marked = marked.join(",");
  return drawFigure(div, [trace], layout, filename).then(() => {
    if (!hoverTokens.has(div)) followHover(div, readout);
    hoverTokens.set(div, tokens.slice());
  });
}

export function drawCosines(div, { cosines, word }) {
  const layers = cosines.map((_, i) => i);
  const ticktext = layers.map((i) => (i === 0 ? "0 (emb)" : String(i)));
  const trace = {
    type: "scatter",
    mode: "lines+markers",
    x: layers,
    y: cosines,
    name: escapePlotly(word),
    line: { color: "#0b5cad", width: 2 },
    marker: { size: 8 },
    hovertemplate: "layer %{x}: cosine %{y:.4f}<extra></extra>",
  };
  const lo = Math.min(...cosines);
  const layout = {
    height: 300,
    margin: { l: 10, r: 10, t: 30, b: 10 },
    title: { text: `cosine of “${escapePlotly(word)}” in A vs B`, font: { size: 13 } },
    xaxis: { tickmode: "array", tickvals: layers, ticktext, title: { text: "layer" }, automargin: true, zeroline: false },
    yaxis: { title: { text: "cosine similarity" }, range: [Math.min(0.5, Math.floor(lo * 10) / 10), 1.02], automargin: true },
    showlegend: false,
  };
  return drawFigure(div, [trace], layout, "model-compare-word");
}
