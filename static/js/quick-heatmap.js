// A Plotly heatmap figure drawn without Plotly: cells on a <canvas>, labels,
// titles and the colour bar in SVG. It reads the same trace and layout that
// Plotly gets (heatmap.js builds them), so the quick map and the Plotly map
// that later replaces it agree: same colours, same labels, same height.
// Drawing one takes about a millisecond; parsing Plotly takes hundreds.

import { VIRIDIS, lutOf } from "./colour.js";
import { FONT_FAMILY, MUTED, INK, niceTicks, quickRoot, svgEl, textWidth, tick, tickText, unescapePlotly } from "./quick-svg.js";

const luts = new Map();

/** 256 packed RGBA colours (little-endian 0xAABBGGRR) for a Plotly colour scale. */
export function colourLut(colorscale) {
  if (typeof colorscale === "string") return lutOf(VIRIDIS);
  const key = JSON.stringify(colorscale);
  if (!luts.has(key)) luts.set(key, lutOf(colorscale));
  return luts.get(key);
}

const lutIndex = (v, zmin, zmax) => {
  const t = zmax > zmin ? ((v - zmin) / (zmax - zmin)) * 255 : 0;
  return t >= 255 ? 255 : t <= 0 ? 0 : t | 0;
};

function darkText(packed) {
  const r = packed & 255;
  const g = (packed >>> 8) & 255;
  const b = (packed >>> 16) & 255;
  return 0.299 * r + 0.587 * g + 0.114 * b > 140;
}

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
  const z = trace.z;
  const n = z.length;
  const m = n ? z[0].length : 0;
  const W = Math.max(120, Math.round(layout.width || width || 320));
  const H = Math.round(layout.height || 260);
  const xa = layout.xaxis || {};
  const ya = layout.yaxis || {};
  const xt = axisTicks(xa, m);
  const yt = axisTicks(ya, n);
  const xAngle = xa.tickangle || 0;
  const xTitle = xa.title && xa.title.text ? unescapePlotly(xa.title.text) : "";
  const yTitle = ya.title && ya.title.text ? unescapePlotly(ya.title.text) : "";
  const cbTitle = trace.colorbar && trace.colorbar.title && trace.colorbar.title.text ? unescapePlotly(trace.colorbar.title.text) : "";
  const zmin = trace.zmin ?? 0;
  const zmax = trace.zmax ?? 1;

  // Margins from the labels' measured widths (Plotly's automargin does the same).
  const yLabelW = Math.max(0, ...yt.texts.map((t) => textWidth(t, yt.size)));
  const xLabelW = Math.max(0, ...xt.texts.map((t) => textWidth(t, xt.size)));
  const xLabelH = xAngle ? xLabelW * Math.abs(Math.sin((xAngle * Math.PI) / 180)) + xt.size : xt.size + 2;
  const barTicks = niceTicks(zmin, zmax, 4);
  const barLabelW = Math.max(...barTicks.map((v) => textWidth(tickText(v), 10)));
  const left = 6 + (yTitle ? 16 : 0) + yLabelW + 6;
  const right = 8 + 10 + 4 + barLabelW + (cbTitle ? 16 : 0) + 4;
  const top = 8;
  const bottom = 6 + xLabelH + (xTitle ? 18 : 0) + 4;
  const PW = Math.max(20, W - left - right);
  const PH = Math.max(20, H - top - bottom);
  const colPx = PW / Math.max(m, 1);
  const rowPx = PH / Math.max(n, 1);
  const reversed = ya.autorange === "reversed";
  const rowTop = (i) => top + (reversed ? i : n - 1 - i) * rowPx;

  const root = quickRoot(div, W, H);
  const dpr = window.devicePixelRatio || 1;
  const lut = colourLut(trace.colorscale || "Viridis");

  // Cells: one pixel per cell, scaled up without smoothing, then the gaps.
  const cells = document.createElement("canvas");
  cells.className = "quick-cells";
  Object.assign(cells.style, { left: `${left}px`, top: `${top}px`, width: `${PW}px`, height: `${PH}px` });
  cells.width = Math.round(PW * dpr);
  cells.height = Math.round(PH * dpr);
  if (n && m) {
    const small = document.createElement("canvas");
    small.width = m;
    small.height = n;
    const sctx = small.getContext("2d");
    const image = sctx.createImageData(m, n);
    const px = new Uint32Array(image.data.buffer);
    for (let i = 0; i < n; i++) {
      const row = (reversed ? i : n - 1 - i) * m;
      for (let j = 0; j < m; j++) {
        const v = z[i][j];
        px[row + j] = v === null || v === undefined ? 0 : lut[lutIndex(v, zmin, zmax)];
      }
    }
    sctx.putImageData(image, 0, 0);
    const ctx = cells.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(small, 0, 0, cells.width, cells.height);
    ctx.fillStyle = "#ffffff";
    if (trace.xgap) for (let j = 1; j < m; j++) ctx.fillRect(Math.round(j * colPx * dpr) - dpr / 2, 0, dpr, cells.height);
    if (trace.ygap) for (let i = 1; i < n; i++) ctx.fillRect(0, Math.round(i * rowPx * dpr) - dpr / 2, cells.width, dpr);
    if (trace.texttemplate) {
      const size = ((trace.textfont && trace.textfont.size) || 11) * dpr;
      ctx.font = `${size}px ${FONT_FAMILY}`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < m; j++) {
          const v = z[i][j];
          if (v === null || v === undefined) continue;
          ctx.fillStyle = darkText(lut[lutIndex(v, zmin, zmax)]) ? INK : "#ffffff";
          const y = ((reversed ? i : n - 1 - i) + 0.5) * rowPx * dpr;
          ctx.fillText(v.toFixed(2), (j + 0.5) * colPx * dpr, y);
        }
      }
    }
  }

  // Colour bar: the scale's 256 colours, bottom = zmin.
  const barH = PH * 0.9;
  const barTop = top + (PH - barH) / 2;
  const barX = left + PW + 8;
  const bar = document.createElement("canvas");
  bar.className = "quick-bar";
  Object.assign(bar.style, { left: `${barX}px`, top: `${barTop}px`, width: "10px", height: `${barH}px` });
  bar.width = 1;
  bar.height = 256;
  const bctx = bar.getContext("2d");
  const bimg = bctx.createImageData(1, 256);
  const bpx = new Uint32Array(bimg.data.buffer);
  for (let i = 0; i < 256; i++) bpx[i] = lut[255 - i];
  bctx.putImageData(bimg, 0, 0);

  const svg = svgEl("svg", { class: "quick-svg", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": FONT_FAMILY, "aria-hidden": "true" });
  const yLayer = svgEl("g", { class: "yaxislayer-above" });
  yt.vals.forEach((v, k) => {
    if (v < -0.5 || v > n - 0.5) return;
    yLayer.append(tick("ytick", yt.texts[k], left - 4, rowTop(v) + rowPx / 2, yt.size, { anchor: "end" }));
  });
  const xLayer = svgEl("g", { class: "xaxislayer-above" });
  xt.vals.forEach((v, k) => {
    if (v < -0.5 || v > m - 0.5) return;
    const x = left + (v + 0.5) * colPx;
    const y = top + PH + 4;
    if (xAngle) xLayer.append(tick("xtick", xt.texts[k], x, y, xt.size, { anchor: "end", angle: xAngle }));
    else xLayer.append(tick("xtick", xt.texts[k], x, y, xt.size, { baseline: "hanging" }));
  });
  svg.append(yLayer, xLayer);
  if (xTitle) svg.append(svgEl("text", { class: "xtitle", x: left + PW / 2, y: H - 6, "text-anchor": "middle", "font-size": 11, fill: INK }, xTitle));
  if (yTitle) {
    const x = 12;
    const y = top + PH / 2;
    svg.append(svgEl("text", { class: "ytitle", x, y, "text-anchor": "middle", "font-size": 11, fill: INK, transform: `rotate(-90 ${x} ${y})` }, yTitle));
  }
  for (const v of barTicks) {
    const y = barTop + barH * (1 - (v - zmin) / (zmax - zmin || 1));
    svg.append(svgEl("text", { class: "cbtick", x: barX + 14, y, "font-size": 10, fill: INK, "dominant-baseline": "middle" }, tickText(v)));
  }
  if (cbTitle) {
    const x = barX + 14 + barLabelW + 10;
    const y = barTop + barH / 2;
    svg.append(svgEl("text", { class: "cbtitle", x, y, "text-anchor": "middle", "font-size": 10, fill: MUTED, transform: `rotate(90 ${x} ${y})` }, cbTitle));
  }
  for (const shape of layout.shapes || []) {
    if (shape.type !== "rect" || shape.yref !== "y") continue;
    const i0 = shape.y0 + 0.5;
    svg.append(svgEl("rect", { class: "quick-shape", x: left, y: rowTop(i0), width: PW, height: rowPx * (shape.y1 - shape.y0), fill: "none", stroke: (shape.line && shape.line.color) || INK, "stroke-width": (shape.line && shape.line.width) || 2 }));
  }
  root.append(cells, bar, svg);
}
