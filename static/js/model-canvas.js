// Small attention maps drawn straight onto <canvas>: 84 Plotly plots of 256 × 256
// would take seconds; a canvas with a colour lookup table takes a millisecond.
// The colours are Plotly's Viridis stops, so a thumbnail and its large Plotly
// view agree.

// Plotly's "Viridis" colour scale, stop for stop.
export const VIRIDIS = [
  [0, "#440154"], [0.06274509803921569, "#48186a"], [0.12549019607843137, "#472d7b"],
  [0.18823529411764706, "#424086"], [0.25098039215686274, "#3b528b"], [0.3137254901960784, "#33638d"],
  [0.3764705882352941, "#2c728e"], [0.4392156862745098, "#26828e"], [0.5019607843137255, "#21918c"],
  [0.5647058823529412, "#1fa088"], [0.6274509803921569, "#28ae80"], [0.6901960784313725, "#3fbc73"],
  [0.7529411764705882, "#5ec962"], [0.8156862745098039, "#84d44b"], [0.8784313725490196, "#addc30"],
  [0.9411764705882353, "#d8e219"], [1, "#fde725"],
];

const hex = (s) => [1, 3, 5].map((i) => Number.parseInt(s.slice(i, i + 2), 16));

/** 256 packed RGBA colours (little-endian Uint32: 0xAABBGGRR). */
export const LUT = (() => {
  const stops = VIRIDIS.map(([t, c]) => [t, hex(c)]);
  const lut = new Uint32Array(256);
  let k = 0;
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    while (k < stops.length - 2 && t > stops[k + 1][0]) k++;
    const [t0, c0] = stops[k];
    const [t1, c1] = stops[k + 1];
    const f = Math.min(1, Math.max(0, (t - t0) / (t1 - t0)));
    const [r, g, b] = c0.map((v, j) => Math.round(v + f * (c1[j] - v)));
    lut[i] = (255 << 24) | (b << 16) | (g << 8) | r;
  }
  return lut;
})();

/** Largest value of a map (for the per-map colour scale). */
export function mapMax(flat) {
  let m = 0;
  for (let i = 0; i < flat.length; i++) if (flat[i] > m) m = flat[i];
  return m;
}

// Thumbnails are at most this many pixels a side: larger maps are max-pooled,
// so a single strong weight stays visible.
const MAX_SIDE = 128;

// Masked cells (a decoder's upper triangle): the grey of the page's lines, so an
// empty cell never reads as a weight of 0 (Viridis' darkest purple).
export const MASKED_COLOUR = "#d0d7de";
export const MASKED = (() => {
  const [r, g, b] = hex(MASKED_COLOUR);
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
})();

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
 * Draw a T × T map (Float32Array, row-major) into canvas, colours from 0 to zmax.
 * causal: the cells above the diagonal are masked (drawn grey, whatever they hold);
 * slidingWindow (with positions): so are the cells beyond a layer's sliding window.
 */
export function drawMap(canvas, flat, T, zmax = 1, { causal = false, slidingWindow = null, positions = null } = {}) {
  const k = Math.ceil(T / MAX_SIDE);
  const side = Math.ceil(T / k);
  if (canvas.width !== side) canvas.width = side;
  if (canvas.height !== side) canvas.height = side;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(side, side);
  const pixels = new Uint32Array(image.data.buffer);
  const scale = zmax > 0 ? 255 / zmax : 0;
  if (k === 1) {
    for (let i = 0; i < T; i++) {
      for (let j = 0; j < T; j++) {
        const v = flat[i * T + j] * scale;
        pixels[i * T + j] = maskedCell(i, j, causal, slidingWindow, positions) ? MASKED : LUT[v >= 255 ? 255 : v <= 0 ? 0 : v | 0];
      }
    }
  } else {
    const pooled = new Float32Array(side * side);
    for (let i = 0; i < T; i++) {
      const row = ((i / k) | 0) * side;
      const offset = i * T;
      for (let j = 0; j < T; j++) {
        const v = flat[offset + j];
        const p = row + ((j / k) | 0);
        if (v > pooled[p]) pooled[p] = v;
      }
    }
    for (let bi = 0; bi < side; bi++) {
      // A pooled block is masked when every cell in it is: its first column is
      // after its last row, or its last column is a window before its first row.
      const lastRow = Math.min(T - 1, (bi + 1) * k - 1);
      for (let bj = 0; bj < side; bj++) {
        const p = bi * side + bj;
        const v = pooled[p] * scale;
        const masked = maskedCell(lastRow, bj * k, causal) || maskedCell(bi * k, Math.min(T - 1, (bj + 1) * k - 1), causal, slidingWindow, positions);
        pixels[p] = masked ? MASKED : LUT[v >= 255 ? 255 : v <= 0 ? 0 : v | 0];
      }
    }
  }
  ctx.putImageData(image, 0, 0);
}
