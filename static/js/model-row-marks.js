// The chosen tokens' rows marked on /model's large map: an outline per row, as Plotly
// shapes on a short text's map (drawn by the quick renderer too) and as boxes over a long
// text's canvas (model-overview.js), placed by token so a pooled or zoomed map marks the
// same rows.

import { el } from "./dom.js";

export const MARK_COLOUR = "#e5484d";
// A mark is at least this tall (px): one row of a 4,096-token map is a fraction of a pixel.
const MIN_MARK = 4;

/** Plotly shapes outlining each of `rows` (the map's y axis counts rows from 0). */
export function markShapes(rows) {
  return rows.map((i) => ({ type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: i - 0.5, y1: i + 0.5, line: { color: MARK_COLOUR, width: 2 } }));
}

/** A box over `canvas`' rows [i, i + 1) of the region [r0, r1) it shows. */
function markBox(canvas, i, [r0, r1]) {
  const row = canvas.clientHeight / (r1 - r0);
  const height = Math.max(row, MIN_MARK);
  const box = el("div", { class: "row-mark", "data-row": i });
  Object.assign(box.style, { left: `${canvas.offsetLeft}px`, top: `${canvas.offsetTop + (i - r0) * row - (height - row) / 2}px`, width: `${canvas.clientWidth}px`, height: `${height}px` });
  return box;
}

/**
 * The marks over a canvas map in `frame` (its positioned parent).  Returns
 * {rows(list), region([r0, r1])}: the rows to mark, the rows the canvas shows; the marks
 * follow the canvas' size.
 */
export function canvasRowMarks(frame, canvas) {
  const layer = el("div", { class: "row-marks", "data-testid": "zoom-marks", "aria-hidden": "true" });
  frame.append(layer);
  let marked = [];
  let shown = null;
  const place = () => {
    const inside = shown ? marked.filter((i) => i >= shown[0] && i < shown[1]) : [];
    layer.replaceChildren(...inside.map((i) => markBox(canvas, i, shown)));
    layer.dataset.rows = inside.join(",");
  };
  new ResizeObserver(place).observe(canvas);
  return {
    rows(next) {
      marked = next;
      place();
    },
    region(next) {
      shown = next;
      place();
    },
  };
}
