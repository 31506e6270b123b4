// Line and bar figures (Plotly scatter and bar traces) drawn as plain SVG, for
// the first paint before Plotly is loaded. Supports what the pages use: linear,
// log and category x axes; linear and log y axes; grouped bars; a legend.

import { FONT_FAMILY, INK, MUTED, niceTicks, quickRoot, svgEl, textWidth, tick, tickText, unescapePlotly } from "./quick-svg.js";

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
  const xTicks = categories ? categories.map((c, k) => ({ pos: k, text: unescapePlotly(c) })) : axisTicks(xa, x0, x1, xType);
  const yTicks = axisTicks(ya, y0, y1, yType).filter((t) => t.pos >= y0 - 1e-9 && t.pos <= y1 + 1e-9);
  const xTitle = xa.title && xa.title.text ? unescapePlotly(xa.title.text) : "";
  const yTitle = ya.title && ya.title.text ? unescapePlotly(ya.title.text) : "";
  const showLegend = layout.showlegend !== false && data.length > 1;

  const yLabelW = Math.max(0, ...yTicks.map((t) => textWidth(t.text, 11)));
  const xLabelW = Math.max(0, ...xTicks.map((t) => textWidth(t.text, 11)));
  const left = 6 + (yTitle ? 18 : 0) + yLabelW + 6;
  const plotGuess = W - left - 12;
  const rotate = categories && xLabelW > plotGuess / Math.max(categories.length, 1) - 4;
  const xLabelH = rotate ? xLabelW * 0.71 + 11 : 15;
  const top = (showLegend ? 24 : 8) + (layout.title ? 20 : 0);
  const bottom = 4 + xLabelH + (xTitle ? 18 : 0) + 4;
  const right = 12;
  const PW = Math.max(20, W - left - right);
  const PH = Math.max(20, H - top - bottom);
  const px = (pos) => left + ((pos - x0) / (x1 - x0 || 1)) * PW;
  const py = (pos) => top + PH - ((pos - y0) / (y1 - y0 || 1)) * PH;

  const root = quickRoot(div, W, H);
  const svg = svgEl("svg", { class: "quick-svg", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": FONT_FAMILY, "aria-hidden": "true" });
  svg.append(svgEl("rect", { x: left, y: top, width: PW, height: PH, fill: "#ffffff" }));
  const grid = svgEl("g", { class: "gridlayer" });
  for (const t of yTicks) grid.append(svgEl("line", { x1: left, x2: left + PW, y1: py(t.pos), y2: py(t.pos), stroke: "#eaeef2" }));
  svg.append(grid);

  const clip = `quick-clip-${Math.random().toString(36).slice(2)}`;
  const defs = svgEl("defs");
  const clipPath = svgEl("clipPath", { id: clip });
  clipPath.append(svgEl("rect", { x: left, y: top, width: PW, height: PH }));
  defs.append(clipPath);
  svg.append(defs);
  const traces = svgEl("g", { class: "quick-traces", "clip-path": `url(#${clip})` });
  const groupW = 0.8;
  data.forEach((trace, k) => {
    const colour = colourOf(trace, k);
    if (trace.type === "bar") {
      const slot = groupW / bars.length;
      const b = bars.indexOf(trace);
      trace.y.forEach((v, i) => {
        const xa0 = px(i - groupW / 2 + b * slot);
        const xa1 = px(i - groupW / 2 + (b + 1) * slot);
        const yv = py(ty(v));
        const yb = py(Math.max(y0, 0));
        traces.append(svgEl("rect", { class: "point", x: xa0, y: Math.min(yv, yb), width: Math.max(1, xa1 - xa0 - 1), height: Math.abs(yb - yv), fill: colour }));
      });
    } else {
      const pts = trace.x.map((x, i) => [px(tx(x)), py(ty(trace.y[i]))]);
      if ((trace.mode || "lines").includes("lines")) {
        traces.append(svgEl("polyline", { points: pts.map((p) => p.join(",")).join(" "), fill: "none", stroke: colour, "stroke-width": (trace.line && trace.line.width) || 2 }));
      }
      if ((trace.mode || "").includes("markers")) {
        for (const [x, y] of pts) traces.append(svgEl("circle", { class: "point", cx: x, cy: y, r: ((trace.marker && trace.marker.size) || 6) / 2, fill: colour }));
      }
    }
  });
  svg.append(traces);

  const yLayer = svgEl("g", { class: "yaxislayer-above" });
  for (const t of yTicks) yLayer.append(tick("ytick", t.text, left - 4, py(t.pos), 11, { anchor: "end" }));
  const xLayer = svgEl("g", { class: "xaxislayer-above" });
  for (const t of xTicks) {
    if (t.pos < x0 - 1e-9 || t.pos > x1 + 1e-9) continue;
    const x = px(t.pos);
    if (rotate) xLayer.append(tick("xtick", t.text, x, top + PH + 4, 11, { anchor: "end", angle: -45 }));
    else xLayer.append(tick("xtick", t.text, x, top + PH + 4, 11, { baseline: "hanging" }));
  }
  svg.append(yLayer, xLayer);
  svg.append(svgEl("rect", { x: left, y: top, width: PW, height: PH, fill: "none", stroke: "#d0d7de" }));
  if (xTitle) svg.append(svgEl("text", { class: "xtitle", x: left + PW / 2, y: H - 6, "text-anchor": "middle", "font-size": 12, fill: INK }, xTitle));
  if (yTitle) {
    const x = 12;
    const y = top + PH / 2;
    svg.append(svgEl("text", { class: "ytitle", x, y, "text-anchor": "middle", "font-size": 12, fill: INK, transform: `rotate(-90 ${x} ${y})` }, yTitle));
  }
  if (layout.title && layout.title.text) {
    svg.append(svgEl("text", { class: "gtitle", x: W / 2, y: 14, "text-anchor": "middle", "font-size": 13, fill: INK }, unescapePlotly(layout.title.text)));
  }
  if (showLegend) {
    const legend = svgEl("g", { class: "legend" });
    let x = left;
    const y = top - 12;
    data.forEach((trace, k) => {
      const name = unescapePlotly(trace.name || `trace ${k}`);
      legend.append(svgEl("rect", { x, y: y - 5, width: 14, height: 10, fill: colourOf(trace, k) }));
      legend.append(svgEl("text", { x: x + 18, y, "font-size": 11, fill: MUTED, "dominant-baseline": "middle" }, name));
      x += 18 + textWidth(name, 11) + 16;
    });
    svg.append(legend);
  }
  root.append(svg);
}
