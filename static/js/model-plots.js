// Plotly figures of the model page: the large map and the cosine-per-layer line.
// drawFigure (heatmap.js) does newPlot once and Plotly.react afterwards.

import { drawFigure } from "./heatmap.js";
import { escapePlotly, tickLabel, tokenLabels } from "./labels.js";
import { VIRIDIS } from "./model-canvas.js";
import { toRows } from "./model-data.js";

// Above this many tokens, hover shows positions only (the readout under the
// plot names the tokens): T² hover strings would cost more than the map.
const HOVER_TEXT_MAX = 128;
// The tokens each large plot currently shows, for its hover readout.
const hoverTokens = new WeakMap();

function tickStep(T) {
  return T <= 48 ? 1 : Math.ceil(T / 24);
}

/**
 * The large map. opts: flat (Float32Array T×T), tokens (plain text), zmax,
 * filename (for export), readout (element that names the hovered pair).
 */
export function drawZoom(div, { flat, tokens, zmax, filename, readout }) {
  const T = tokens.length;
  const z = toRows(flat, T);
  const labels = tokenLabels(tokens);
  const esc = labels.map(escapePlotly);
  const idx = labels.map((_, i) => i);
  const step = tickStep(T);
  const ticks = idx.filter((i) => i % step === 0);
  const trace = {
    type: "heatmap",
    z,
    x: idx,
    y: idx,
    colorscale: VIRIDIS,
    zmin: 0,
    zmax,
    hoverongaps: false,
    colorbar: { thickness: 10, len: 0.9, outlinewidth: 0, tickfont: { size: 10 }, title: { text: "weight", side: "right", font: { size: 11 } } },
  };
  if (T <= 40) Object.assign(trace, { xgap: 1, ygap: 1 });
  if (T <= HOVER_TEXT_MAX) {
    trace.text = z.map((row, i) => row.map((_, j) => `${esc[i]} → ${esc[j]}`));
    trace.hovertemplate = "%{text}<br>weight: %{z:.4f}<extra></extra>";
  } else {
    trace.hovertemplate = "row %{y} → column %{x}<br>weight: %{z:.4f}<extra></extra>";
  }
  const fontSize = T <= 24 ? 11 : 9;
  const axis = (title) => ({
    tickmode: "array",
    tickvals: ticks,
    ticktext: ticks.map((i) => escapePlotly(tickLabel(labels[i]))),
    tickfont: { size: fontSize },
    title: { text: title, standoff: 4, font: { size: 11 } },
    automargin: true,
    showgrid: false,
    zeroline: false,
  });
  const width = div.clientWidth || 480;
  const layout = {
    height: Math.round(Math.max(380, Math.min(680, width * 0.95))),
    uirevision: `${T}:${tokens.join("\u0000")}`,
    xaxis: { ...axis("attended to (key)"), side: "bottom", tickangle: -60 },
    yaxis: { ...axis("attending (query)"), autorange: "reversed" },
  };
  return drawFigure(div, [trace], layout, filename).then(() => {
    // The readout names the hovered pair in plain text (textContent: no escaping needed).
    if (!hoverTokens.has(div)) {
      div.on("plotly_hover", (ev) => {
        const p = ev.points && ev.points[0];
        const names = hoverTokens.get(div);
        if (!p || !names) return;
        readout.textContent = `${names[p.y]} (row ${p.y}) → ${names[p.x]} (column ${p.x}): ${Number(p.z).toFixed(4)}`;
      });
      div.on("plotly_unhover", () => {
        readout.textContent = "";
      });
    }
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
