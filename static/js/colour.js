// The one colour and canvas module: the colour scales (Plotly's Viridis stop for stop,
// so a canvas map and a Plotly map agree; a diverging blue-white-red for signed values),
// a value's colour on a linear or log scale (or, signed, on the diverging one), and a
// map's cells painted onto a canvas a pixel each (a pooled map's cells as the server
// pooled them: the browser never pools).  colour-bar.js draws the scales' bars.

// Plotly's "Viridis" colour scale, stop for stop.
export const VIRIDIS = [
  [0, "#440154"], [0.06274509803921569, "#48186a"], [0.12549019607843137, "#472d7b"],
  [0.18823529411764706, "#424086"], [0.25098039215686274, "#3b528b"], [0.3137254901960784, "#33638d"],
  [0.3764705882352941, "#2c728e"], [0.4392156862745098, "#26828e"], [0.5019607843137255, "#21918c"],
  [0.5647058823529412, "#1fa088"], [0.6274509803921569, "#28ae80"], [0.6901960784313725, "#3fbc73"],
  [0.7529411764705882, "#5ec962"], [0.8156862745098039, "#84d44b"], [0.8784313725490196, "#addc30"],
  [0.9411764705882353, "#d8e219"], [1, "#fde725"],
];

// Signed values and differences (a − b), in the Plotly heatmaps (heatmap.js) and as cell
// colours (signedColour: the ablation's Δloss grids, the why card's parts): ColorBrewer's
// RdBu in five classes (colour-blind safe), negative = blue, white at 0, positive = red.
export const DIVERGING = [
  [0, "#0571b0"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#f4a582"], [1, "#ca0020"],
];

// The log scale spans this many powers of ten below the colour range's top.
export const LOG_DECADES = 4;

export const hex = (s) => [1, 3, 5].map((i) => Number.parseInt(s.slice(i, i + 2), 16));
export const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;
const pack = ([r, g, b]) => ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;

const parsed = new WeakMap(); // stops -> [[t, [r, g, b]], …]
const parse = (stops) => {
  if (!parsed.has(stops)) parsed.set(stops, stops.map(([t, c]) => [t, hex(c)]));
  return parsed.get(stops);
};

/** The colour at t in [0, 1] (clamped; not a number: 0) of a stop list, as [r, g, b]. */
export function rgbAt(t, stops = VIRIDIS) {
  const s = parse(stops);
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
  let k = 0;
  while (k < s.length - 2 && x > s[k + 1][0]) k++;
  const [t0, c0] = s[k];
  const [t1, c1] = s[k + 1];
  const f = Math.min(1, Math.max(0, (x - t0) / (t1 - t0 || 1)));
  return c0.map((v, j) => Math.round(v + f * (c1[j] - v)));
}

const luts = new WeakMap();

/** 256 packed RGBA colours (little-endian Uint32: 0xAABBGGRR) of a stop list. */
export function lutOf(stops = VIRIDIS) {
  if (!luts.has(stops)) luts.set(stops, Uint32Array.from({ length: 256 }, (_, i) => pack(rgbAt(i / 255, stops))));
  return luts.get(stops);
}

const scaleLuts = new Map();

/** The 256 packed colours of a Plotly colour scale: a stop list, or a name (Plotly's "Viridis"). */
export function scaleLut(colorscale) {
  if (typeof colorscale === "string") return lutOf(VIRIDIS);
  const key = JSON.stringify(colorscale);
  if (!scaleLuts.has(key)) scaleLuts.set(key, lutOf(colorscale));
  return scaleLuts.get(key);
}

/** A value's place (0..255) on a linear scale from zmin to zmax (a Plotly heatmap's). */
export function rangeIndex(v, zmin, zmax) {
  const t = zmax > zmin ? ((v - zmin) / (zmax - zmin)) * 255 : 0;
  return t >= 255 ? 255 : t <= 0 ? 0 : t | 0;
}

/** Whether an [r, g, b] colour is light enough to want dark text on it (its luma above 140). */
const light = ([r, g, b]) => 0.299 * r + 0.587 * g + 0.114 * b > 140;

/** Whether a packed colour is light enough to want dark text on it. */
export function lightColour(packed) {
  return light([packed & 255, (packed >>> 8) & 255, (packed >>> 16) & 255]);
}

/** A signed value's colour on the diverging scale from −top (blue) through 0 (white) to
 * top (red), and a text colour that reads on it: {background, color}. */
export function signedColour(v, top) {
  const rgb = rgbAt(0.5 + (Number.isFinite(v) ? v : 0) / (2 * (top > 0 ? top : 1)), DIVERGING);
  return { background: css(rgb), color: light(rgb) ? "#111" : "#fff" };
}

export const LUT = lutOf(VIRIDIS);

// Masked cells (a decoder's upper triangle): the grey of the page's lines, so an
// empty cell never reads as a weight of 0 (Viridis' darkest purple).
export const MASKED_COLOUR = "#d0d7de";
export const MASKED = pack(hex(MASKED_COLOUR));

/** A text colour that reads on the colour at t of Viridis. */
export const inkOn = (t) => (t > 0.55 ? "#111" : "#fff");

/** A value's place (0..255) under the range's top zmax: linear, or log (LOG_DECADES
 * powers of ten below the top). */
export function colourIndex(v, zmax, log = false) {
  if (!(v > 0) || !(zmax > 0)) return 0;
  const t = log ? 1 + Math.log10(v / zmax) / LOG_DECADES : v / zmax;
  return t >= 1 ? 255 : t <= 0 ? 0 : (t * 255) | 0;
}

/** Largest value of a map (for the per-map colour scale). */
export function mapMax(flat) {
  let m = 0;
  for (let i = 0; i < flat.length; i++) if (flat[i] > m) m = flat[i];
  return m;
}

/** The top of a map's colour range: 1 (fixed), or its largest cell, column 0 left out
 * when the sink is apart (column 0 then shows at the top colour wherever it is larger). */
export function rangeTop(flat, cols, { fixed = false, sinkApart = false, firstCol = 0 } = {}) {
  if (fixed) return 1;
  const skip = sinkApart && firstCol === 0 ? 1 : 0;
  let m = 0;
  for (let p = 0; p < flat.length; p++) if (p % cols >= skip && flat[p] > m) m = flat[p];
  return Math.max(m, 1e-6);
}

/**
 * Whether query i cannot read key j in a causal map: j is after i, or (a layer with a
 * sliding window) window or more positions before it.  positions: each shown token's
 * index in the whole text (tokens may be hidden), default 0..T-1.
 */
export function maskedCell(i, j, causal, slidingWindow = null, positions = null) {
  if (!causal) return false;
  if (j > i) return true;
  if (!slidingWindow) return false;
  return (positions ? positions[i] - positions[j] : i - j) >= slidingWindow;
}

/**
 * Paint rows × cols cells (Float32Array, row-major) into pixels (packed RGBA, `stride`
 * pixels a row) from (x0, y0), a pixel each.  block: the token block each cell covers
 * (pooled maps), offset: the first token row and column.  A cell is grey when every
 * pair in it is masked (causal, beyond a sliding window): a block across the diagonal
 * shows its largest weight, so a previous-token head's line stays visible.
 */
export function paintCells(pixels, stride, [x0, y0], flat, { rows, cols, block = [1, 1], offset = [0, 0], T, zmax, log = false, causal = false, slidingWindow = null, positions = null }) {
  const [br, bc] = block;
  const [r0, c0] = offset;
  const size = T === undefined ? Math.max(r0 + rows * br, c0 + cols * bc) : T;
  for (let i = 0; i < rows; i++) {
    const first = r0 + i * br;
    const last = Math.min(size - 1, first + br - 1);
    const line = (y0 + i) * stride + x0;
    // Causal: the cells from `open` on start after the block's last row (all masked).
    const open = causal ? Math.min(cols, Math.max(0, Math.floor((last - c0) / bc) + 1)) : cols;
    for (let j = 0; j < open; j++) {
      // A sliding window: masked when even the block's last column is beyond its first row's window.
      const right = Math.min(size - 1, c0 + j * bc + bc - 1);
      const masked = causal && slidingWindow && (positions ? positions[first] - positions[right] : first - right) >= slidingWindow;
      pixels[line + j] = masked ? MASKED : LUT[colourIndex(flat[i * cols + j], zmax, log)];
    }
    pixels.fill(MASKED, line + open, line + cols);
  }
}

/** Draw rows × cols cells on a canvas of their size, one pixel each (paintCells' options). */
export function drawCells(canvas, flat, options) {
  const { rows, cols } = options;
  if (canvas.width !== cols) canvas.width = cols;
  if (canvas.height !== rows) canvas.height = rows;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(cols, rows);
  paintCells(new Uint32Array(image.data.buffer), cols, [0, 0], flat, options);
  ctx.putImageData(image, 0, 0);
}

/**
 * Draw a T × T map (Float32Array, row-major) a pixel a cell, colours from 0 to zmax.
 * causal: the cells above the diagonal are masked (drawn grey, whatever they hold);
 * slidingWindow (with positions): so are the cells beyond a layer's sliding window.
 */
export function drawMap(canvas, flat, T, zmax = 1, { causal = false, slidingWindow = null, positions = null } = {}) {
  drawCells(canvas, flat, { rows: T, cols: T, T, zmax, causal, slidingWindow, positions });
}
