// A Plotly heatmap figure drawn without Plotly: cells on a <canvas>, labels,
// titles and the colour bar in SVG. It reads the same trace and layout that
// Plotly gets (heatmap.js builds them), so the quick map and the Plotly map
// that later replaces it agree: same colours, same labels, same height.
// Drawing one takes about a millisecond; parsing Plotly takes hundreds.

import { lightColour, rangeIndex, scaleLut } from "./colour.js";
import { FONT_FAMILY, MUTED, INK, niceTicks, quickRoot, quickSvg, svgEl, textWidth, tick, tickText, titleText, unescapePlotly } from "./quick-svg.js";

function axisTicks(axis, n) {
  const vals = axis.tickvals || Array.from({ length: n }, (_, i) => i);
  const texts = (axis.ticktext || vals.map(String)).map(unescapePlotly);
  return { vals, texts, size: (axis.tickfont && axis.tickfont.size) || 12 };
}

/**
 * Draw `trace` (type heatmap) with `layout` into `div`, `width` CSS pixels wide
 * (layout.width wins when set). Returns nothing; the DOM is replaced in one go.
 */
export function drawQuickHeatmap(div, trace, layout, width) {
  const f = heatmapFrame(trace, layout, width);
  const lut = scaleLut(trace.colorscale || "Viridis");
  const root = quickRoot(div, f.W, f.H);
  const svg = quickSvg(f.W, f.H);
  svg.append(...axisLabels(f), ...colourBarLabels(f), ...rowShapes(f, layout.shapes || []));
  root.append(cellsCanvas(f, trace, lut), colourBarCanvas(f, lut), svg);
}

/** What the figure shows besides its cells: sizes, ticks, titles and the colour range. */
function heatmapFrame(trace, layout, width) {
  const n = trace.z.length;
  const m = n ? trace.z[0].length : 0;
  const xa = layout.xaxis || {};
  const ya = layout.yaxis || {};
  const zmin = trace.zmin ?? 0;
  const zmax = trace.zmax ?? 1;
  const barTicks = niceTicks(zmin, zmax, 4);
  return placePlot({
    n,
    m,
    W: Math.max(120, Math.round(layout.width || width || 320)),
    H: Math.round(layout.height || 260),
    xt: axisTicks(xa, m),
    yt: axisTicks(ya, n),
    xAngle: xa.tickangle || 0,
    xTitle: titleText(xa),
    yTitle: titleText(ya),
    cbTitle: titleText(trace.colorbar),
    zmin,
    zmax,
    barTicks,
    barLabelW: Math.max(...barTicks.map((v) => textWidth(tickText(v), 10))),
    reversed: ya.autorange === "reversed",
  });
}

/** The plot's box and the colour bar's, margins from the labels' measured widths (Plotly's automargin does the same). */
function placePlot(f) {
  const yLabelW = Math.max(0, ...f.yt.texts.map((t) => textWidth(t, f.yt.size)));
  const xLabelW = Math.max(0, ...f.xt.texts.map((t) => textWidth(t, f.xt.size)));
  const xLabelH = f.xAngle ? xLabelW * Math.abs(Math.sin((f.xAngle * Math.PI) / 180)) + f.xt.size : f.xt.size + 2;
  const left = 6 + (f.yTitle ? 16 : 0) + yLabelW + 6;
  const right = 8 + 10 + 4 + f.barLabelW + (f.cbTitle ? 16 : 0) + 4;
  const top = 8;
  const bottom = 6 + xLabelH + (f.xTitle ? 18 : 0) + 4;
  const PW = Math.max(20, f.W - left - right);
  const PH = Math.max(20, f.H - top - bottom);
  const barH = PH * 0.9;
  return {
    ...f,
    left,
    top,
    PW,
    PH,
    colPx: PW / Math.max(f.m, 1),
    rowPx: PH / Math.max(f.n, 1),
    barH,
    barTop: top + (PH - barH) / 2,
    barX: left + PW + 8,
  };
}

/** The line of the picture (0 = top) that the map's row i is drawn on. */
const lineOf = (f, i) => (f.reversed ? i : f.n - 1 - i);
const rowTop = (f, i) => f.top + lineOf(f, i) * f.rowPx;
const blank = (v) => v === null || v === undefined;

/** The cells on a canvas as large as the plot: one pixel per cell, scaled up without smoothing, then the gaps and numbers. */
function cellsCanvas(f, trace, lut) {
  const dpr = window.devicePixelRatio || 1;
  const cells = document.createElement("canvas");
  cells.className = "quick-cells";
  Object.assign(cells.style, { left: `${f.left}px`, top: `${f.top}px`, width: `${f.PW}px`, height: `${f.PH}px` });
  cells.width = Math.round(f.PW * dpr);
  cells.height = Math.round(f.PH * dpr);
  if (!f.n || !f.m) return cells;
  const ctx = cells.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(pixelPerCell(f, trace.z, lut), 0, 0, cells.width, cells.height);
  drawGaps(ctx, f, trace, dpr);
  if (trace.texttemplate) drawCellNumbers(ctx, f, trace, lut, dpr);
  return cells;
}

/** A canvas m × n pixels, a cell each (blank cells transparent). */
function pixelPerCell(f, z, lut) {
  const small = document.createElement("canvas");
  small.width = f.m;
  small.height = f.n;
  const sctx = small.getContext("2d");
  const image = sctx.createImageData(f.m, f.n);
  const px = new Uint32Array(image.data.buffer);
  for (let i = 0; i < f.n; i++) {
    const row = lineOf(f, i) * f.m;
    for (let j = 0; j < f.m; j++) {
      const v = z[i][j];
      px[row + j] = blank(v) ? 0 : lut[rangeIndex(v, f.zmin, f.zmax)];
    }
  }
  sctx.putImageData(image, 0, 0);
  return small;
}

/** White lines between the columns (trace.xgap) and rows (trace.ygap). */
function drawGaps(ctx, f, trace, dpr) {
  const { width, height } = ctx.canvas;
  ctx.fillStyle = "#ffffff";
  if (trace.xgap) for (let j = 1; j < f.m; j++) ctx.fillRect(Math.round(j * f.colPx * dpr) - dpr / 2, 0, dpr, height);
  if (trace.ygap) for (let i = 1; i < f.n; i++) ctx.fillRect(0, Math.round(i * f.rowPx * dpr) - dpr / 2, width, dpr);
}

/** Each cell's value (two decimals) in a colour that reads on the cell. */
function drawCellNumbers(ctx, f, trace, lut, dpr) {
  const size = ((trace.textfont && trace.textfont.size) || 11) * dpr;
  ctx.font = `${size}px ${FONT_FAMILY}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (let i = 0; i < f.n; i++) {
    for (let j = 0; j < f.m; j++) {
      const v = trace.z[i][j];
      if (blank(v)) continue;
      ctx.fillStyle = lightColour(lut[rangeIndex(v, f.zmin, f.zmax)]) ? INK : "#ffffff";
      ctx.fillText(v.toFixed(2), (j + 0.5) * f.colPx * dpr, (lineOf(f, i) + 0.5) * f.rowPx * dpr);
    }
  }
}

/** The colour bar: the scale's 256 colours, bottom = zmin. */
function colourBarCanvas(f, lut) {
  const bar = document.createElement("canvas");
  bar.className = "quick-bar";
  Object.assign(bar.style, { left: `${f.barX}px`, top: `${f.barTop}px`, width: "10px", height: `${f.barH}px` });
  bar.width = 1;
  bar.height = 256;
  const bctx = bar.getContext("2d");
  const bimg = bctx.createImageData(1, 256);
  const bpx = new Uint32Array(bimg.data.buffer);
  for (let i = 0; i < 256; i++) bpx[i] = lut[255 - i];
  bctx.putImageData(bimg, 0, 0);
  return bar;
}

/** The axes' tick labels and titles (SVG). */
function axisLabels(f) {
  const yLayer = svgEl("g", { class: "yaxislayer-above" });
  f.yt.vals.forEach((v, k) => {
    if (v < -0.5 || v > f.n - 0.5) return;
    yLayer.append(tick("ytick", f.yt.texts[k], f.left - 4, rowTop(f, v) + f.rowPx / 2, f.yt.size, { anchor: "end" }));
  });
  const xLayer = svgEl("g", { class: "xaxislayer-above" });
  f.xt.vals.forEach((v, k) => {
    if (v < -0.5 || v > f.m - 0.5) return;
    const x = f.left + (v + 0.5) * f.colPx;
    const y = f.top + f.PH + 4;
    if (f.xAngle) xLayer.append(tick("xtick", f.xt.texts[k], x, y, f.xt.size, { anchor: "end", angle: f.xAngle }));
    else xLayer.append(tick("xtick", f.xt.texts[k], x, y, f.xt.size, { baseline: "hanging" }));
  });
  const out = [yLayer, xLayer];
  if (f.xTitle) out.push(svgEl("text", { class: "xtitle", x: f.left + f.PW / 2, y: f.H - 6, "text-anchor": "middle", "font-size": 11, fill: INK }, f.xTitle));
  if (f.yTitle) {
    const x = 12;
    const y = f.top + f.PH / 2;
    out.push(svgEl("text", { class: "ytitle", x, y, "text-anchor": "middle", "font-size": 11, fill: INK, transform: `rotate(-90 ${x} ${y})` }, f.yTitle));
  }
  return out;
}

/** The colour bar's tick labels and title (SVG). */
function colourBarLabels(f) {
  const out = f.barTicks.map((v) => {
    const y = f.barTop + f.barH * (1 - (v - f.zmin) / (f.zmax - f.zmin || 1));
    return svgEl("text", { class: "cbtick", x: f.barX + 14, y, "font-size": 10, fill: INK, "dominant-baseline": "middle" }, tickText(v));
  });
  if (f.cbTitle) {
    const x = f.barX + 14 + f.barLabelW + 10;
    const y = f.barTop + f.barH / 2;
    out.push(svgEl("text", { class: "cbtitle", x, y, "text-anchor": "middle", "font-size": 10, fill: MUTED, transform: `rotate(90 ${x} ${y})` }, f.cbTitle));
  }
  return out;
}

/** The layout's rectangles around rows (yref "y"), outlined across the plot. */
function rowShapes(f, shapes) {
  return shapes
    .filter((shape) => shape.type === "rect" && shape.yref === "y")
    .map((shape) =>
      svgEl("rect", { class: "quick-shape", x: f.left, y: rowTop(f, shape.y0 + 0.5), width: f.PW, height: f.rowPx * (shape.y1 - shape.y0), fill: "none", stroke: (shape.line && shape.line.color) || INK, "stroke-width": (shape.line && shape.line.width) || 2 }),
    );
}
