// A colour bar for a map drawn outside Plotly (a canvas, a table): colour.js's Viridis
// from its bottom to its top value, the scale named (linear or log) and ticked, so that
// a colour reads as a number; and the map's two axis titles.  Plotly's own maps draw theirs.

import { el } from "./dom.js";
import { VIRIDIS } from "./colour.js";

const gradient = (direction, stops) => `linear-gradient(${direction}, ${stops.map(([t, c]) => `${c} ${(t * 100).toFixed(1)}%`).join(", ")})`;

const number = (v) => (v === 0 ? "0" : Math.abs(v) >= 0.01 ? String(Number(v.toPrecision(3))) : v.toExponential(1));

/** The ticks, top first: linear 0, half, top; log the top and each power of ten below it. */
function ticks(zmax, log, decades) {
  if (log) return Array.from({ length: decades + 1 }, (_, k) => zmax * 10 ** -k);
  return [zmax, zmax / 2, 0];
}

/** A colour bar element (fill it with setColourBar), upright or lying under a table. */
export function colourBar(testid, { horizontal = false } = {}) {
  return el("div", { class: `colour-bar${horizontal ? " horizontal" : ""}`, "data-testid": testid, role: "img" }, [
    el("span", { class: "cb-ramp", style: `background: ${gradient(horizontal ? "to right" : "to top", VIRIDIS)}` }),
    el("span", { class: "cb-ticks" }),
    el("span", { class: "cb-label" }),
  ]);
}

/**
 * Show zmax (the top colour), the scale (log: `decades` powers of ten below the top,
 * anything smaller at the bottom colour) and what the colour measures.
 */
export function setColourBar(bar, { zmax, log = false, decades = 4, label = "weight" }) {
  const values = ticks(zmax, log, decades);
  bar.querySelector(".cb-ticks").replaceChildren(...values.map((v, k) => el("span", { text: `${k === values.length - 1 && log ? "≤ " : ""}${number(v)}` })));
  const scale = log ? `log scale, ${decades} powers of ten` : "linear scale";
  bar.querySelector(".cb-label").textContent = `${label} (${scale})`;
  Object.assign(bar.dataset, { zmax: String(zmax), scale: log ? "log" : "linear" });
  bar.setAttribute("aria-label", `Colour scale: ${label}, ${scale}, from ${number(values[values.length - 1])} to ${number(zmax)}`);
}

/** A map with its axis titles and colour bar around it: rows down the side, columns below. */
export function framedMap(map, bar, { rowTitle = "attends (query) ↓", colTitle = "attended to (key) →", testid = "map-axes" } = {}) {
  return el("div", { class: "framed-map", "data-testid": testid }, [
    el("span", { class: "axis-title axis-y", text: rowTitle }),
    map,
    bar,
    el("span", { class: "axis-title axis-x", text: colTitle }),
  ]);
}
