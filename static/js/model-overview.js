// Long texts and many heads on /model: the grid shows a pooled overview (each map
// max-pooled by the server to at most OVERVIEW_CELLS a side, `pool` on
// /api/model/attention), and the large map is one head fetched at full resolution
// (`layers` + `heads`), or one region of it (`rows`/`cols`), drawn on a canvas one
// pixel per cell: never megabytes handed to Plotly.  Also here: the log colour
// scale, the first-token (sink) column left out of the colour range, and the
// layer filter of the grid.

import { errorText, post } from "./api.js";
import { LOG_DECADES, drawCells, maskedCell } from "./colour.js";
import { colourBar, framedMap, setColourBar } from "./colour-bar.js";
import { el } from "./dom.js";
import { decodeCompact } from "./model-data.js";
import { plainModelError } from "./model-errors.js";
import { canvasRowMarks } from "./model-row-marks.js";

// Past this many tokens, or this many maps (layers × heads), the grid asks for pooled maps.
export const LONG_TEXT = 128;
export const MANY_MAPS = 100;
// Each thumbnail is pooled to at most this many cells a side (a thumbnail is 38 px):
// more for few maps (they are also the large map's source for short texts).
const POOL_FEW = 128;
const POOL_MANY = 48;
// The large map is drawn a pixel per cell up to this side; past it the server pools it.
export const ZOOM_MAX_SIDE = 1024;
/** The `pool` the grid asks for: thumbnails are small, and many of them smaller. */
export const gridPool = (L, H) => (L * H > MANY_MAPS ? POOL_MANY : POOL_FEW);

/** Whether an answer's maps were pooled (a block larger than one cell). */
export const isPooled = (answer) => Boolean(answer && answer.pooled && answer.pooled.block.some((b) => b > 1));

// ---------- the layer filter ----------

/** "1-3, 7" -> the set {1, 2, 3, 7} within 1..L; "" -> every layer; null when unreadable. */
export function parseLayers(text, L) {
  const all = new Set(Array.from({ length: L }, (_, i) => i + 1));
  if (!text.trim()) return all;
  const chosen = new Set();
  for (const part of text.split(",")) {
    const m = /^\s*(\d+)\s*(?:[-–]\s*(\d+)\s*)?$/.exec(part);
    if (!m) return null;
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (a < 1 || b > L || a > b) return null;
    for (let l = a; l <= b; l++) chosen.add(l);
  }
  return chosen;
}

/**
 * A "Layers" field above the grid: rows of other layers are hidden (their label and
 * buttons carry data-layer).  onChange(visible set) after each valid change.
 */
export function layerFilter(grid, onChange) {
  const input = el("input", { id: "layer-filter", "data-testid": "layer-filter", type: "text", inputmode: "numeric", placeholder: "all", autocomplete: "off", "aria-describedby": "layer-filter-note" });
  const note = el("span", { class: "hint", id: "layer-filter-note", "data-testid": "layer-filter-note", role: "status" });
  const box = el("div", { class: "field layer-filter" }, [el("label", { for: "layer-filter", text: "Layers" }), input, note]);
  grid.before(box);
  let visible = null;
  const apply = () => {
    const L = Number(grid.dataset.layers || 0);
    const chosen = parseLayers(input.value, L);
    if (!chosen) {
      note.textContent = `Write layers as 1-3, 7 (this model has layers 1 to ${L}).`;
      input.setAttribute("aria-invalid", "true");
      return;
    }
    input.removeAttribute("aria-invalid");
    note.textContent = chosen.size === L ? "" : `${chosen.size} of ${L} layers shown`;
    visible = chosen;
    for (const cell of grid.querySelectorAll("[data-layer]")) cell.hidden = !chosen.has(Number(cell.dataset.layer));
    onChange(chosen);
  };
  input.addEventListener("input", apply);
  return {
    /** Apply the filter again (after the grid is rebuilt). */
    refresh: apply,
    /** Whether layer l is shown. */
    shows: (l) => !visible || visible.has(l),
  };
}

// ---------- the large map on canvas ----------

/** One map (a head, the layer's mean or its rollout) at full resolution, or a region of it. */
export async function fetchMap({ request, layer, head, rows = null, cols = null, T }) {
  // float16: at thousands of tokens most weights are below uint8's step (1/255), and
  // the log scale is there to show them.
  const body = { ...request, format: "compact", dtype: "float16", layers: [layer], heads: [/^\d+$/.test(head) ? Number(head) : 1] };
  // One head needs none of the layer's average: on a long text that skips every other head.
  if (head !== "mean") body.head_average = false;
  if (rows) body.rows = rows;
  if (cols) body.cols = cols;
  const side = Math.max(rows ? rows[1] - rows[0] : T, cols ? cols[1] - cols[0] : T);
  if (side > ZOOM_MAX_SIDE) body.pool = ZOOM_MAX_SIDE;
  const answer = await post("/api/model/attention", body);
  const which = head === "mean" ? answer.head_average[0] : head === "rollout" ? answer.rollout && answer.rollout[0] : answer.attentions[0];
  if (!which) throw Object.assign(new Error("the server did not compute the rollout for this text"), { status: 200 });
  const decoded = decodeCompact(which);
  const shape = decoded.shape.slice(-2);
  const region = answer.region || { rows: [0, T], cols: [0, T] };
  const block = answer.pooled ? answer.pooled.block : [1, 1];
  return { values: decoded.values, rows: shape[0], cols: shape[1], region, block };
}

const clampInt = (v, lo, hi) => Math.min(hi, Math.max(lo, Math.floor(v)));

/** The large map's elements: the canvas in its frame (with the drag box), its colour
 * bar and axes, the rows/columns form and the note. */
function zoomParts() {
  const canvas = el("canvas", { class: "zoom-canvas", "data-testid": "zoom-canvas", width: 1, height: 1, tabindex: "0", "aria-label": "The large map; drag to zoom into a region" });
  const frame = el("div", { class: "zoom-frame" }, [canvas, el("div", { class: "zoom-box", hidden: true })]);
  const bar = colourBar("zoom-colour-bar");
  const field = (name, label) => el("input", { type: "number", min: 0, step: 1, "data-testid": `zoom-${name}`, name, "aria-label": label });
  const form = el("form", { class: "zoom-region", "data-testid": "zoom-region", novalidate: true }, [
    el("span", { text: "Rows" }), field("row0", "first row"), el("span", { text: "to" }), field("row1", "row after the last"),
    el("span", { text: "columns" }), field("col0", "first column"), el("span", { text: "to" }), field("col1", "column after the last"),
    el("button", { type: "submit", "data-testid": "zoom-apply", text: "Zoom" }),
    el("button", { type: "button", "data-testid": "zoom-whole", text: "Whole map" }),
  ]);
  const note = el("p", { class: "hint", "data-testid": "zoom-note", role: "status" });
  const root = el("div", { class: "canvas-zoom", "data-testid": "canvas-zoom" }, [framedMap(frame, bar, { testid: "zoom-axes" }), form, note]);
  const marks = canvasRowMarks(frame, canvas);
  return { canvas, rect: frame.querySelector(".zoom-box"), marks, bar, form, note, root, input: (name) => form.querySelector(`input[name='${name}']`) };
}

function fillFields(z) {
  const { rows, cols } = z.map.region;
  z.input("row0").value = rows[0];
  z.input("row1").value = rows[1];
  z.input("col0").value = cols[0];
  z.input("col1").value = cols[1];
}

/** What the note says of the map shown: its region, its cells (pooled or not), its scale. */
function noteText(z, { rows, cols }, log) {
  const { map, ctx } = z;
  const whole = rows[0] === 0 && cols[0] === 0 && rows[1] === ctx.T && cols[1] === ctx.T;
  const pooled = map.block.some((b) => b > 1);
  const where = whole ? "The whole map" : `Rows ${rows[0]}–${rows[1] - 1}, columns ${cols[0]}–${cols[1] - 1}`;
  const cells = pooled ? `each the largest weight of ${map.block[0]} × ${map.block[1]} (drag to zoom in for full resolution)` : "full resolution";
  return `${where}: ${map.rows} × ${map.cols} cells, ${cells}${log ? `; log colour scale over ${LOG_DECADES} powers of ten` : ""}. Drag across the map to zoom into a region.`;
}

function draw(z) {
  const { ctx, map, canvas } = z;
  if (!ctx || !map) return;
  const { zmax, log } = ctx.colour(map);
  drawCells(canvas, map.values, { rows: map.rows, cols: map.cols, block: map.block, offset: [map.region.rows[0], map.region.cols[0]], T: ctx.T, zmax, log, ...ctx.mask });
  const { rows, cols } = map.region;
  setColourBar(z.bar, { zmax, log, decades: LOG_DECADES });
  canvas.style.aspectRatio = `${cols[1] - cols[0]} / ${rows[1] - rows[0]}`; // a region keeps its shape
  Object.assign(canvas.dataset, { rows: rows.join(","), cols: cols.join(","), block: map.block.join(","), key: ctx.key });
  z.note.textContent = noteText(z, map.region, log);
  z.marks.region(rows);
  z.root.dataset.ready = `${ctx.key}:${rows.join(",")}:${cols.join(",")}`;
}

async function load(z, rows, cols) {
  const mine = ++z.seq;
  z.root.dataset.ready = "";
  try {
    const got = await z.ctx.load(rows, cols);
    if (mine !== z.seq) return;
    z.map = got;
    fillFields(z);
    draw(z);
  } catch (err) {
    if (mine !== z.seq) return;
    z.note.textContent = `This map could not be loaded: ${errorText(plainModelError(err))}`;
  }
}

/** The cell (token row, token column) under a pointer event, or null. */
function cellAt(z, ev) {
  const { map } = z;
  if (!map) return null;
  const b = z.canvas.getBoundingClientRect();
  const x = (ev.clientX - b.left) / b.width;
  const y = (ev.clientY - b.top) / b.height;
  if (x < 0 || x >= 1 || y < 0 || y >= 1) return null;
  const i = Math.floor(y * map.rows);
  const j = Math.floor(x * map.cols);
  return { i, j, row: map.region.rows[0] + i * map.block[0], col: map.region.cols[0] + j * map.block[1] };
}

/** Hover: the drag box while dragging, the cell's weight in the readout. */
function onMove(z, ev, readout) {
  const c = cellAt(z, ev);
  const { drag, map, ctx } = z;
  if (drag && c) {
    const b = z.canvas.getBoundingClientRect();
    const x0 = Math.min(drag.x, ev.clientX) - b.left;
    const y0 = Math.min(drag.y, ev.clientY) - b.top;
    Object.assign(z.rect.style, { left: `${x0}px`, top: `${y0}px`, width: `${Math.abs(ev.clientX - drag.x)}px`, height: `${Math.abs(ev.clientY - drag.y)}px` });
    z.rect.hidden = false;
  }
  if (!c) return;
  const v = map.values[c.i * map.cols + c.j];
  const names = ctx.tokens;
  const pooled = map.block.some((b) => b > 1);
  const cell = pooled ? `rows ${c.row}+, columns ${c.col}+ (largest)` : `${names[c.row]} (row ${c.row}) → ${names[c.col]} (column ${c.col})`;
  const masked = ctx.mask.causal && maskedCell(c.row, c.col, true, ctx.mask.slidingWindow, ctx.mask.positions) && !pooled;
  readout.textContent = `${cell}: ${masked ? "masked" : v.toFixed(4)}`;
}

/** A drag ends: a click picks its row's token, a drag zooms into the region it spans. */
function onUp(z, ev) {
  if (!z.drag) return;
  const start = z.drag;
  z.drag = null;
  z.rect.hidden = true;
  const end = cellAt(z, ev) || start;
  if (Math.abs(ev.clientX - start.x) < 4 && Math.abs(ev.clientY - start.y) < 4) {
    if (z.ctx.pick) z.ctx.pick(start.row); // a click, not a drag: the row's token
    return;
  }
  const [br, bc] = z.map.block;
  const { T } = z.ctx;
  load(z, [Math.min(start.row, end.row), Math.min(T, Math.max(start.row, end.row) + br)], [Math.min(start.col, end.col), Math.min(T, Math.max(start.col, end.col) + bc)]);
}

function bindZoom(z, readout) {
  const { canvas, form } = z;
  canvas.addEventListener("pointermove", (ev) => onMove(z, ev, readout));
  canvas.addEventListener("pointerleave", () => {
    if (!z.drag) readout.textContent = "";
  });
  canvas.addEventListener("pointerdown", (ev) => {
    const c = cellAt(z, ev);
    if (!c) return;
    z.drag = { ...c, x: ev.clientX, y: ev.clientY };
    canvas.setPointerCapture(ev.pointerId);
  });
  canvas.addEventListener("pointerup", (ev) => onUp(z, ev));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const T = z.ctx ? z.ctx.T : 0;
    const read = (name, lo, hi) => clampInt(Number(z.input(name).value), lo, hi);
    const r0 = read("row0", 0, T - 1);
    const c0 = read("col0", 0, T - 1);
    load(z, [r0, read("row1", r0 + 1, T)], [c0, read("col1", c0 + 1, T)]);
  });
  form.querySelector("[data-testid='zoom-whole']").addEventListener("click", () => load(z, null, null));
}

/**
 * The canvas large map: box (the zoom card's plot div), readout (hover text).
 * show(ctx) draws a map ctx = {key, T, tokens, load(rows, cols) -> map, colour(map) ->
 * {zmax, log}, mask, pick(row)}; a drag (or the rows/cols fields) asks load() for that
 * region, a click picks the token of its row.
 */
export function canvasZoom(box, readout) {
  // ctx: what is shown; map: the loaded map; drag: where a drag started.
  const z = { ...zoomParts(), ctx: null, map: null, seq: 0, drag: null };
  bindZoom(z, readout);
  return {
    element: z.root,
    /** Show a new map (whole). */
    show(next) {
      z.ctx = next;
      z.map = null;
      return load(z, null, null);
    },
    /** Colours changed (scale, sink): draw again what is loaded. */
    redraw: () => draw(z),
    /** Outline these token rows (the chosen tokens') where the map shows them. */
    mark: (rows) => z.marks.rows(rows),
  };
}

/** A region of a whole map held on the page (a short text), as fetchMap answers. */
export function cropMap(flat, T, rows = null, cols = null) {
  const [r0, r1] = rows || [0, T];
  const [c0, c1] = cols || [0, T];
  const values = new Float32Array((r1 - r0) * (c1 - c0));
  for (let i = r0; i < r1; i++) values.set(flat.subarray(i * T + c0, i * T + c1), (i - r0) * (c1 - c0));
  return { values, rows: r1 - r0, cols: c1 - c0, region: { rows: [r0, r1], cols: [c0, c1] }, block: [1, 1] };
}
