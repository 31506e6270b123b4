// A layer × head grid of numbers as coloured buttons (Viridis, lowest to highest value;
// signed values such as a Δloss on the diverging scale, white at 0), for the head scores
// on /model and /train and the ablation and attribution grids.

import { el } from "./dom.js";
import { css, inkOn, rgbAt, signedColour } from "./colour.js";

/** Viridis colour of t in [0, 1], and a text colour that reads on it. */
export function colour(t) {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
  return { background: css(rgbAt(x)), color: inkOn(x) };
}

/** A layer × head grid of buttons coloured by `values` (L × H); click(l, h) from 1.
 * signed: coloured from −max|v| (blue) through 0 (white) to max|v| (red). */
export function heatGrid({ values, testid, label, click, pressed = () => false, digits = 2, signed = false }) {
  const L = values.length;
  const H = values[0].length;
  const flat = values.flat();
  const lo = Math.min(...flat);
  const hi = Math.max(...flat);
  const span = hi - lo || 1;
  const top = Math.max(Math.abs(lo), Math.abs(hi));
  const cells = [el("span", { class: "hg-corner", "aria-hidden": "true" })];
  for (let h = 1; h <= H; h++) cells.push(el("span", { class: "hg-col", text: `H${h}` }));
  for (let l = 1; l <= L; l++) {
    cells.push(el("span", { class: "hg-row", text: `L${l}` }));
    for (let h = 1; h <= H; h++) {
      const v = values[l - 1][h - 1];
      const c = signed ? signedColour(v, top) : colour((v - lo) / span);
      cells.push(
        el("button", {
          type: "button",
          class: "hg-cell",
          style: `background:${c.background};color:${c.color}`,
          "data-testid": `${testid}-L${l}-H${h}`,
          "data-value": String(v),
          "aria-pressed": pressed(l, h) ? "true" : "false",
          "aria-label": `Layer ${l}, head ${h}: ${label} ${v.toFixed(digits)}`,
          title: `Layer ${l}, head ${h}: ${label} ${v.toFixed(digits)}`,
          text: v.toFixed(digits).replace(/^(-?)0\./, "$1."),
          onclick: () => click(l, h),
        }),
      );
    }
  }
  return el("div", { class: "heat-grid", "data-testid": testid, style: `grid-template-columns: 2.2rem repeat(${H}, 2.4rem)` }, cells);
}
