// Line and bar figures (Plotly scatter and bar traces) drawn as plain SVG, for
// the first paint before Plotly is loaded. Supports what the pages use: linear,
// log and category x axes; linear and log y axes; grouped bars; a legend.

import { INK, MUTED, niceTicks, quickRoot, quickSvg, svgEl, textWidth, tick, tickText, titleText, unescapePlotly } from "./quick-svg.js";

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
const log10 = Math.log10;

function colourOf(trace, k) {
  return (trace.marker && trace.marker.color) || (trace.line && trace.line.color) || PALETTE[k % PALETTE.length];
}

/** Ticks [{v (data value), pos (axis units), text}] of an axis. */
function axisTicks(axis, lo, hi, type) {
  if (axis.tickmode === "array" && axis.tickvals) {
    return axis.tickvals.map((v, k) => ({ v, pos: v, text: unescapePlotly(axis.ticktext ? axis.ticktext[k] : tickText(v)) }));
  }
  if (type === "log") {
    const d = axis.dtick || 1;
    const out = [];
    for (let k = Math.ceil(lo / d - 1e-9); k * d <= hi + 1e-9; k++) {
      const v = 10 ** (k * d);
      out.push({ v, pos: k * d, text: axis.tickformat === "d" ? String(Math.round(v)) : tickText(Number(v.toPrecision(6))) });
    }
    return out;
  }
  return niceTicks(lo, hi, 5).map((v) => ({ v, pos: v, text: tickText(v) }));
}

function extent(values, pad = 0.05) {
  const finite = values.filter(Number.isFinite);
  if (!finite.length) return [0, 1];
  let lo = Math.min(...finite);
  let hi = Math.max(...finite);
  if (hi === lo) [lo, hi] = [lo - 1, hi + 1];
  const p = (hi - lo) * pad;
  return [lo - p, hi + p];
}

/** Draw scatter/bar `data` with `layout` into `div`, `width` CSS pixels wide. */
export function drawQuickChart(div, data, layout, width) {
  const W = Math.max(160, Math.round(layout.width || width || 320));
  const H = Math.round(layout.height || 300);
  const f = chartBox(chartAxes(data, layout), layout, W, H);
  const root = quickRoot(div, W, H);
  const svg = quickSvg(W, H);
  svg.append(...plotBackground(f), ...traceMarks(f, data), ...axisLayers(f), ...titles(f, layout));
  if (f.showLegend) svg.append(legend(f, data));
  root.append(svg);
}

/** The axes' types, ranges, ticks and titles, and the transforms from data to axis units. */
function chartAxes(data, layout) {
  const xa = layout.xaxis || {};
  const ya = layout.yaxis || {};
  const bars = data.filter((t) => t.type === "bar");
  const categories = bars.length ? bars[0].x.map(String) : null;
  const xType = categories ? "category" : xa.type === "log" ? "log" : "linear";
  const yType = ya.type === "log" ? "log" : "linear";
  const tx = (v) => (xType === "log" ? log10(v) : v);
  const ty = (v) => (yType === "log" ? log10(v) : v);
  const [x0, x1] = categories ? [-0.5, categories.length - 0.5] : xa.range || extent(data.flatMap((t) => t.x.map(tx)));
  const [y0, y1] = ya.range || (bars.length ? [0, extent(data.flatMap((t) => t.y))[1]] : extent(data.flatMap((t) => t.y.map(ty))));
  return {
    bars,
    categories,
    tx,
    ty,
    x0,
    x1,
    y0,
    y1,
    xTicks: categories ? categories.map((c, k) => ({ pos: k, text: unescapePlotly(c) })) : axisTicks(xa, x0, x1, xType),
    yTicks: axisTicks(ya, y0, y1, yType).filter((t) => t.pos >= y0 - 1e-9 && t.pos <= y1 + 1e-9),
    xTitle: titleText(xa),
    yTitle: titleText(ya),
    showLegend: layout.showlegend !== false && data.length > 1,
  };
}

/** The plot's box inside W × H (margins from the labels' measured widths) and the maps from axis units to pixels. */
function chartBox(f, layout, W, H) {
  const yLabelW = Math.max(0, ...f.yTicks.map((t) => textWidth(t.text, 11)));
  const xLabelW = Math.max(0, ...f.xTicks.map((t) => textWidth(t.text, 11)));
  const left = 6 + (f.yTitle ? 18 : 0) + yLabelW + 6;
  const plotGuess = W - left - 12;
  const rotate = Boolean(f.categories) && xLabelW > plotGuess / Math.max(f.categories.length, 1) - 4;
  const xLabelH = rotate ? xLabelW * 0.71 + 11 : 15;
  const top = (f.showLegend ? 24 : 8) + (layout.title ? 20 : 0);
  const bottom = 4 + xLabelH + (f.xTitle ? 18 : 0) + 4;
  const right = 12;
  const PW = Math.max(20, W - left - right);
  const PH = Math.max(20, H - top - bottom);
  const px = (pos) => left + ((pos - f.x0) / (f.x1 - f.x0 || 1)) * PW;
  const py = (pos) => top + PH - ((pos - f.y0) / (f.y1 - f.y0 || 1)) * PH;
  return { ...f, W, H, left, top, PW, PH, rotate, px, py };
}

/** The plot's white box and the horizontal grid lines. */
function plotBackground(f) {
  const grid = svgEl("g", { class: "gridlayer" });
  for (const t of f.yTicks) grid.append(svgEl("line", { x1: f.left, x2: f.left + f.PW, y1: f.py(t.pos), y2: f.py(t.pos), stroke: "#eaeef2" }));
  return [svgEl("rect", { x: f.left, y: f.top, width: f.PW, height: f.PH, fill: "#ffffff" }), grid];
}

/** Every trace's bars, lines and markers, clipped to the plot's box. */
function traceMarks(f, data) {
  const clip = `quick-clip-${Math.random().toString(36).slice(2)}`;
  const defs = svgEl("defs");
  const clipPath = svgEl("clipPath", { id: clip });
  clipPath.append(svgEl("rect", { x: f.left, y: f.top, width: f.PW, height: f.PH }));
  defs.append(clipPath);
  const traces = svgEl("g", { class: "quick-traces", "clip-path": `url(#${clip})` });
  data.forEach((trace, k) => {
    const colour = colourOf(trace, k);
    traces.append(...(trace.type === "bar" ? barMarks(f, trace, colour) : lineMarks(f, trace, colour)));
  });
  return [defs, traces];
}

const GROUP_WIDTH = 0.8;

/** A bar trace's rectangles, side by side with the other bar traces' in each category. */
function barMarks(f, trace, colour) {
  const slot = GROUP_WIDTH / f.bars.length;
  const b = f.bars.indexOf(trace);
  return trace.y.map((v, i) => {
    const xa0 = f.px(i - GROUP_WIDTH / 2 + b * slot);
    const xa1 = f.px(i - GROUP_WIDTH / 2 + (b + 1) * slot);
    const yv = f.py(f.ty(v));
    const yb = f.py(Math.max(f.y0, 0));
    return svgEl("rect", { class: "point", x: xa0, y: Math.min(yv, yb), width: Math.max(1, xa1 - xa0 - 1), height: Math.abs(yb - yv), fill: colour });
  });
}

/** A scatter trace's line and markers, as its mode asks. */
function lineMarks(f, trace, colour) {
  const pts = trace.x.map((x, i) => [f.px(f.tx(x)), f.py(f.ty(trace.y[i]))]);
  const out = [];
  if ((trace.mode || "lines").includes("lines")) {
    out.push(svgEl("polyline", { points: pts.map((p) => p.join(",")).join(" "), fill: "none", stroke: colour, "stroke-width": (trace.line && trace.line.width) || 2 }));
  }
  if ((trace.mode || "").includes("markers")) {
    for (const [x, y] of pts) out.push(svgEl("circle", { class: "point", cx: x, cy: y, r: ((trace.marker && trace.marker.size) || 6) / 2, fill: colour }));
  }
  return out;
}

/** The tick labels of both axes and the plot's frame. */
function axisLayers(f) {
  const yLayer = svgEl("g", { class: "yaxislayer-above" });
  for (const t of f.yTicks) yLayer.append(tick("ytick", t.text, f.left - 4, f.py(t.pos), 11, { anchor: "end" }));
  const xLayer = svgEl("g", { class: "xaxislayer-above" });
  for (const t of f.xTicks) {
    if (t.pos < f.x0 - 1e-9 || t.pos > f.x1 + 1e-9) continue;
    const x = f.px(t.pos);
    if (f.rotate) xLayer.append(tick("xtick", t.text, x, f.top + f.PH + 4, 11, { anchor: "end", angle: -45 }));
    else xLayer.append(tick("xtick", t.text, x, f.top + f.PH + 4, 11, { baseline: "hanging" }));
  }
  return [yLayer, xLayer, svgEl("rect", { x: f.left, y: f.top, width: f.PW, height: f.PH, fill: "none", stroke: "#d0d7de" })];
}

/** The axes' titles and the figure's. */
function titles(f, layout) {
  const out = [];
  if (f.xTitle) out.push(svgEl("text", { class: "xtitle", x: f.left + f.PW / 2, y: f.H - 6, "text-anchor": "middle", "font-size": 12, fill: INK }, f.xTitle));
  if (f.yTitle) {
    const x = 12;
    const y = f.top + f.PH / 2;
    out.push(svgEl("text", { class: "ytitle", x, y, "text-anchor": "middle", "font-size": 12, fill: INK, transform: `rotate(-90 ${x} ${y})` }, f.yTitle));
  }
  if (layout.title && layout.title.text) {
    out.push(svgEl("text", { class: "gtitle", x: f.W / 2, y: 14, "text-anchor": "middle", "font-size": 13, fill: INK }, unescapePlotly(layout.title.text)));
  }
  return out;
}

/** One swatch and name per trace, in a row above the plot. */
function legend(f, data) {
  const g = svgEl("g", { class: "legend" });
  let x = f.left;
  const y = f.top - 12;
  data.forEach((trace, k) => {
    const name = unescapePlotly(trace.name || `trace ${k}`);
    g.append(svgEl("rect", { x, y: y - 5, width: 14, height: 10, fill: colourOf(trace, k) }));
    g.append(svgEl("text", { x: x + 18, y, "font-size": 11, fill: MUTED, "dominant-baseline": "middle" }, name));
    x += 18 + textWidth(name, 11) + 16;
  });
  return g;
}
