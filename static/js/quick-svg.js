// Shared pieces of the quick renderers (quick-heatmap.js, quick-chart.js): SVG
// elements, text measurement, and Plotly's label escaping undone for textContent.

const SVG_NS = "http://www.w3.org/2000/svg";
export const FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
export const INK = "#1b1f24";
export const MUTED = "#57606a";

export function svgEl(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

/** Labels arrive escaped for Plotly (&lt; &gt; &amp;); textContent wants the plain text. */
export function unescapePlotly(text) {
  return String(text).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

/** The plain text of a Plotly title (an axis's, a colour bar's), or "" when it has none. */
export const titleText = (part) => (part && part.title && part.title.text ? unescapePlotly(part.title.text) : "");

let measureCtx = null;

/** Width in CSS pixels of `text` at `size` px (canvas measureText: no layout). */
export function textWidth(text, size) {
  if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
  measureCtx.font = `${size}px ${FONT_FAMILY}`;
  return measureCtx.measureText(text).width;
}

/** A tick label as Plotly draws it: <g class="xtick|ytick"><text>…</text></g>. */
export function tick(cls, text, x, y, size, { anchor = "middle", angle = 0, baseline = "middle" } = {}) {
  const g = svgEl("g", { class: cls });
  const attrs = {
    x,
    y,
    "font-size": size,
    "text-anchor": anchor,
    "dominant-baseline": baseline,
    fill: INK,
  };
  if (angle) attrs.transform = `rotate(${angle} ${x} ${y})`;
  g.append(svgEl("text", attrs, text));
  return g;
}

/** About `count` round numbers covering [lo, hi]. */
export function niceTicks(lo, hi, count = 5) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || hi <= lo) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => raw <= s) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

export function tickText(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 10000 || a < 0.001) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

/** The SVG layer of a quick figure, W × H CSS pixels. */
export function quickSvg(W, H) {
  return svgEl("svg", { class: "quick-svg", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "font-family": FONT_FAMILY, "aria-hidden": "true" });
}

/** A fresh root inside `div` for a quick figure: the previous quick figure is replaced. */
export function quickRoot(div, width, height) {
  const root = document.createElement("div");
  root.className = "quick-plot";
  root.style.width = `${width}px`;
  root.style.height = `${height}px`;
  div.replaceChildren(root);
  return root;
}
