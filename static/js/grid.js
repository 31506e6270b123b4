// A small editable matrix: a table of number inputs, one per cell.
// onEdit(row, col, value) fires when a cell is committed (change event).

import { el } from "./dom.js";

export const MAX_GRID_CELLS = 400;

export function matrixGrid({ name, testid, matrix, rowLabels, colLabels, onEdit }) {
  const rows = matrix.length;
  const cols = rows ? matrix[0].length : 0;
  const wrap = el("div", { class: "grid-wrap", "data-testid": testid });
  wrap.append(el("h3", { class: "grid-title", text: `${name} (${rows} × ${cols})` }));
  if (rows * cols > MAX_GRID_CELLS) {
    wrap.append(el("p", { class: "hint", text: `${rows * cols} numbers: too many to edit here (limit ${MAX_GRID_CELLS}).` }));
    return wrap;
  }
  const head = el("tr", {}, [el("th", { scope: "col" }), ...colLabels.map((c) => el("th", { scope: "col", text: c }))]);
  const body = matrix.map((row, i) =>
    el("tr", {}, [
      el("th", { scope: "row", text: rowLabels[i], title: rowLabels[i] }),
      ...row.map((value, j) =>
        el("td", {}, [
          el("input", {
            type: "number",
            step: "0.1",
            value: Number(value.toFixed(4)),
            "aria-label": `${name} row ${i + 1} (${rowLabels[i]}) column ${j + 1}`,
            "data-row": i,
            "data-col": j,
            onchange: (ev) => onEdit(i, j, ev.target.value),
          }),
        ]),
      ),
    ]),
  );
  wrap.append(el("div", { class: "grid-scroll" }, [el("table", { class: "grid" }, [el("thead", {}, head), el("tbody", {}, body)])]));
  return wrap;
}

/**
 * Write `matrices` (in the order of the grids in `box`) into the existing inputs,
 * touching only the cells whose number changed and leaving the one being typed in.
 * Returns false when the grids do not match (then the caller rebuilds them).
 */
export function refreshGrids(box, matrices) {
  const tables = box.querySelectorAll("table.grid");
  if (tables.length !== matrices.length) return false;
  for (const [k, table] of [...tables].entries()) {
    const inputs = table.querySelectorAll("input");
    const m = matrices[k];
    if (!m || inputs.length !== m.length * (m.length ? m[0].length : 0)) return false;
    for (const input of inputs) {
      if (input === document.activeElement) continue;
      const text = String(Number(m[input.dataset.row][input.dataset.col].toFixed(4)));
      if (input.value !== text) input.value = text;
    }
  }
  return true;
}

export function identity(n) {
  return Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));
}

/** d_in × d_out with ones on the diagonal: a neutral start for explicit matrices. */
export function eyeLike(rows, cols) {
  return Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === j ? 1 : 0)));
}

export function clone(matrix) {
  return matrix.map((row) => row.slice());
}
