// The head grid of /model: a row of labels, then per layer its label and a button per
// head, the mean and the rollout ("Layer 3, head 7" to a screen reader; arrow keys move
// between them, Enter opens one).
//
// Thumbnails: a few maps get a canvas each.  Past MANY_MAPS (a 1B model's 16 × 32 = 512
// heads) they are drawn on one atlas: every thumbnail's cells painted into one ImageData
// (a slot each), put once, and scaled onto one canvas under the buttons with a
// drawImage each: never hundreds of canvases to create, fill and composite per change.

import { el } from "./dom.js";
import { paintCells } from "./colour.js";
import { MANY_MAPS } from "./model-overview.js";
import { EXTRA_MAPS } from "./model-state.js";

/** The grid's columns: heads "1".."H", then the mean and the rollout. */
export const gridColumns = (H) => [...Array.from({ length: H }, (_, i) => String(i + 1)), ...EXTRA_MAPS];

/** Whether a grid of L layers × H heads draws its thumbnails on one atlas. */
export const usesAtlas = (L, H) => L * H > MANY_MAPS;

export function mapName(layer, head) {
  if (head === "mean") return `Layer ${layer}, mean of heads`;
  if (head === "rollout") return `Rollout through layer ${layer}`;
  return `Layer ${layer}, head ${head}`;
}

export const gridKey = (layer, head) => `${layer}-${head}`;

/**
 * Fill `grid` with the labels and buttons of L layers × H heads (+ mean, rollout).
 * onPick(layer, head) when a button is clicked (or Enter / Space on it).  Returns the
 * buttons by gridKey; with `atlas` their thumbnails are drawn by thumbAtlas() below,
 * else on a canvas in each button.
 */
export function buildHeadGrid(grid, L, H, onPick, atlas = usesAtlas(L, H)) {
  const cells = [el("span", { class: "col-label", "aria-hidden": "true" })];
  for (let h = 1; h <= H; h++) cells.push(el("span", { class: "col-label", text: `H${h}` }));
  cells.push(el("span", { class: "col-label extra", text: "mean" }), el("span", { class: "col-label extra", text: "rollout" }));
  const buttons = new Map();
  for (let l = 1; l <= L; l++) {
    cells.push(el("span", { class: "row-label", "data-layer": l, text: `Layer ${l}` }));
    for (const head of gridColumns(H)) {
      const extra = EXTRA_MAPS.includes(head);
      const button = el(
        "button",
        {
          type: "button",
          class: `map-btn pending${extra ? " extra" : ""}`,
          "data-testid": extra ? `map-L${l}-${head}` : `map-L${l}-H${head}`,
          "data-layer": l,
          "data-head": head,
          "data-kind": extra ? head : "head",
          "aria-label": mapName(l, head),
          "aria-pressed": "false",
          title: mapName(l, head),
          tabindex: "-1",
          onclick: () => onPick(l, head),
        },
        atlas ? [] : [el("canvas", { width: 1, height: 1, "aria-hidden": "true" })],
      );
      buttons.set(gridKey(l, head), button);
      cells.push(button);
    }
  }
  grid.style.gridTemplateColumns = `3.4rem repeat(${H + 2}, 42px)`;
  grid.classList.toggle("atlas", atlas);
  grid.replaceChildren(...cells);
  grid.dataset.layers = String(L);
  grid.dataset.heads = String(H);
  return buttons;
}

function slot(a, button) {
  const i = a.index.get(button);
  return [(i % a.perRow) * a.side, Math.floor(i / a.perRow) * a.side];
}

function resize(a, wanted) {
  a.side = wanted;
  a.source.width = a.perRow * a.side;
  a.source.height = (a.list.length / a.perRow) * a.side;
  a.image = a.sourceCtx.createImageData(a.source.width, a.source.height);
  a.pixels = new Uint32Array(a.image.data.buffer);
  a.painted.clear();
}

function blit(a, button) {
  const place = a.places.get(button);
  const size = a.painted.get(button);
  if (!place || !size) return;
  const [sx, sy] = slot(a, button);
  a.ctx.drawImage(a.source, sx, sy, size[1], size[0], place.x, place.y, place.w, place.h);
}

/** Where each shown button is, in device pixels of the canvas; the canvas's size. */
function measure(a) {
  const ratio = Math.min(2, window.devicePixelRatio || 1);
  a.places = new Map();
  let right = 1;
  let bottom = 1;
  for (const button of a.list) {
    if (button.hidden || !button.offsetParent) continue;
    const x = button.offsetLeft + button.clientLeft;
    const y = button.offsetTop + button.clientTop;
    const w = button.clientWidth;
    const h = button.clientHeight;
    a.places.set(button, { x: Math.round(x * ratio), y: Math.round(y * ratio), w: Math.round(w * ratio), h: Math.round(h * ratio) });
    right = Math.max(right, x + w);
    bottom = Math.max(bottom, y + h);
  }
  return { ratio, width: Math.ceil(right * ratio), height: Math.ceil(bottom * ratio) };
}

function layout(a) {
  const { canvas, ctx } = a;
  const { ratio, width, height } = measure(a);
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;
    canvas.height = height;
    canvas.style.width = `${width / ratio}px`;
    canvas.style.height = `${height / ratio}px`;
  } else ctx.clearRect(0, 0, width, height);
  ctx.imageSmoothingEnabled = false;
  for (const button of a.painted.keys()) blit(a, button);
}

/** A change of the grid's size (a font, a narrower window) moves the buttons: follow them. */
function follow(a, grid) {
  let size = "";
  const observer = new ResizeObserver(() => {
    if (!a.canvas.isConnected) return observer.disconnect(); // the grid was built again
    const now = `${grid.clientWidth}x${grid.clientHeight}`;
    if (size && now !== size) layout(a);
    size = now;
  });
  observer.observe(grid);
}

/** Put the painted slots onto the canvas, each scaled into its button's place. */
function flush(a) {
  if (!a.dirty.size) return;
  let top = Infinity;
  let last = -Infinity;
  for (const button of a.dirty) {
    const y = slot(a, button)[1];
    top = Math.min(top, y);
    last = Math.max(last, y + a.side);
  }
  a.sourceCtx.putImageData(a.image, 0, 0, 0, top, a.source.width, last - top);
  for (const button of a.dirty) {
    const place = a.places.get(button);
    if (place) a.ctx.clearRect(place.x, place.y, place.w, place.h);
    blit(a, button);
  }
  a.dirty.clear();
}

/**
 * The atlas of a grid's thumbnails: one canvas under the buttons (data-testid
 * "grid-atlas").  paint(button, flat, options) paints a thumbnail's cells (paintCells'
 * options: rows, cols, block, T, zmax, log, mask) into its slot; flush() puts the painted
 * slots and scales them onto the canvas; layout() measures the buttons again (after the
 * layer filter hid some) and draws every painted thumbnail where its button is.
 */
export function thumbAtlas(grid, buttons) {
  const canvas = el("canvas", { class: "grid-atlas", "data-testid": "grid-atlas", "aria-hidden": "true", width: 1, height: 1 });
  grid.prepend(canvas);
  const list = [...buttons.values()];
  const source = document.createElement("canvas");
  // image: the slots' ImageData (perRow × L slots of side × side pixels); painted: button ->
  // [rows, cols] of its thumbnail; places: button -> {x, y, w, h} in device pixels.
  const a = {
    canvas,
    ctx: canvas.getContext("2d"),
    list,
    perRow: list.length / Number(grid.dataset.layers),
    index: new Map(list.map((b, i) => [b, i])),
    source,
    sourceCtx: source.getContext("2d"),
    image: null,
    pixels: null,
    side: 0,
    painted: new Map(),
    dirty: new Set(),
    places: new Map(),
  };
  follow(a, grid);
  return {
    element: canvas,
    layout: () => layout(a),
    paint(button, flat, options) {
      const wanted = Math.max(options.rows, options.cols);
      if (wanted !== a.side) resize(a, wanted);
      paintCells(a.pixels, a.source.width, slot(a, button), flat, options);
      a.painted.set(button, [options.rows, options.cols]);
      a.dirty.add(button);
    },
    flush: () => flush(a),
  };
}
