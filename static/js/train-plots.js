// The training page's pictures: the loss curves (Plotly) with the bigram line,
// and the probe's attention for every layer and head (canvas thumbnails; one
// map large in Plotly, with the characters as labels and the future masked).

import { el } from "./dom.js";
import { drawFigure, drawHeatmap } from "./heatmap.js";
import { tokenLabels } from "./labels.js";
import { drawMap } from "./colour.js";

const COLORS = { batch: "#9aa5b1", train: "#0b5cad", val: "#d9480f", baseline: "#1b1f24" };

/**
 * losses: {batch: [[step, loss]], train: [[step, loss]], val: [[step, loss]]};
 * baseline: the bigram's val loss (or null); maxSteps: the x range.
 */
export function drawLoss(div, losses, baseline, maxSteps) {
  const line = (points, name, color, extra = {}) => ({
    type: "scatter",
    mode: "lines",
    name,
    x: points.map((p) => p[0]),
    y: points.map((p) => p[1]),
    line: { color, width: 2 },
    hovertemplate: `${name}: %{y:.4f} at step %{x}<extra></extra>`,
    ...extra,
  });
  const data = [
    line(losses.batch, "batch", COLORS.batch, { line: { color: COLORS.batch, width: 1 } }),
    line(losses.train, "train", COLORS.train, { mode: "lines+markers", marker: { size: 5 } }),
    line(losses.val, "val", COLORS.val, { mode: "lines+markers", marker: { size: 5 } }),
  ];
  if (baseline !== null && baseline !== undefined) {
    data.push(
      line([[0, baseline], [maxSteps, baseline]], "bigram baseline", COLORS.baseline, {
        line: { color: COLORS.baseline, width: 1.5, dash: "dash" },
      }),
    );
  }
  const all = [...losses.batch, ...losses.train, ...losses.val].map((p) => p[1]);
  const top = Math.max(1, baseline || 0, ...all.filter(Number.isFinite));
  const layout = {
    height: 320,
    margin: { l: 50, r: 10, t: 10, b: 40 },
    uirevision: "loss",
    legend: { orientation: "h", y: 1.12, x: 0 },
    xaxis: { title: { text: "step" }, range: [0, Math.max(maxSteps, 1)], zeroline: false },
    // From 0, explicitly: the quick (pre-Plotly) renderer reads ranges, not rangemode.
    yaxis: { title: { text: "loss (nats / char)" }, range: [0, top * 1.05], zeroline: false },
  };
  return drawFigure(div, data, layout, "training-loss");
}

/** One layer × head map out of a snapshot's (L, H, T, T) values. */
export function headMap(snapshot, layer, head) {
  const [, H, T] = snapshot.shape;
  const start = (layer * H + head) * T * T;
  return snapshot.values.subarray(start, start + T * T);
}

/**
 * (Re)build the grid of thumbnails for L layers × H heads; onPick(layer, head).
 * Returns the canvases, indexed [layer][head].
 */
export function buildGrid(container, L, H, onPick) {
  container.style.setProperty("--heads", String(H));
  const canvases = [];
  const cells = [el("span", { class: "corner" })];
  for (let h = 0; h < H; h++) cells.push(el("span", { class: "col-label", text: `head ${h + 1}` }));
  for (let l = 0; l < L; l++) {
    cells.push(el("span", { class: "row-label", text: `layer ${l + 1}` }));
    const row = [];
    for (let h = 0; h < H; h++) {
      const canvas = el("canvas", { width: 1, height: 1 });
      const button = el(
        "button",
        {
          type: "button",
          class: "map-btn",
          "data-testid": `map-${l + 1}-${h + 1}`,
          "aria-label": `Layer ${l + 1}, head ${h + 1}`,
          "aria-pressed": "false",
          onclick: () => onPick(l, h),
        },
        canvas,
      );
      cells.push(button);
      row.push(canvas);
    }
    canvases.push(row);
  }
  container.replaceChildren(...cells);
  return canvases;
}

export function drawGrid(canvases, snapshot) {
  const T = snapshot.shape[2];
  canvases.forEach((row, l) => row.forEach((canvas, h) => drawMap(canvas, headMap(snapshot, l, h), T, 1)));
}

export function markPicked(container, layer, head) {
  for (const button of container.querySelectorAll(".map-btn")) {
    const picked = button.dataset.testid === `map-${layer + 1}-${head + 1}`;
    button.setAttribute("aria-pressed", picked ? "true" : "false");
  }
}

/** The picked map large: rows attend to columns, the future (j > i) shown as masked. */
export function drawZoom(div, snapshot, layer, head, tokens) {
  const T = snapshot.shape[2];
  const flat = headMap(snapshot, layer, head);
  const z = Array.from({ length: T }, (_, i) =>
    Array.from({ length: T }, (_, j) => (j > i ? null : flat[i * T + j])),
  );
  const labels = tokenLabels(tokens);
  return drawHeatmap(div, {
    z,
    rows: labels,
    cols: labels,
    kind: "weights",
    rowTitle: "attends (query)",
    colTitle: "attended to (key)",
    filename: `attention-layer${layer + 1}-head${head + 1}`,
    uirevision: `${layer}-${head}`,
  });
}
