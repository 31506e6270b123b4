// A colour bar for a map drawn outside Plotly (a canvas, a table): a colour scale of
// colour.js (Viridis; diverging for a difference) from its bottom to its top value,
// the scale named (linear, log or diverging) and ticked, so that a colour reads as a
// number; and the map's two axis titles.  Plotly's own maps draw theirs.

import { el } from "./dom.js";
import { DIVERGING, VIRIDIS } from "./colour.js";

const gradient = (direction, stops = VIRIDIS) => `linear-gradient(${direction}, ${stops.map(([t, c]) => `${c} ${(t * 100).toFixed(1)}%`).join(", ")})`;

const number = (v) => (v === 0 ? "0" : Math.abs(v) >= 0.01 ? String(Number(v.toPrecision(3))) : v.toExponential(1));

/** The ticks, top first: linear 0, half, top; log the top and each power of ten below
 * it; diverging the top, 0 and its negative. */
function ticks(zmax, log, decades, diverging) {
  if (diverging) return [zmax, 0, -zmax];
  if (log) return Array.from({ length: decades + 1 }, (_, k) => zmax * 10 ** -k);
  return [zmax, zmax / 2, 0];
}

/** A colour bar element (fill it with setColourBar), upright or lying under a table;
 * diverging: blue below 0, red above (a difference). */
export function colourBar(testid, { horizontal = false, diverging = false } = {}) {
  return el("div", { class: `colour-bar${horizontal ? " horizontal" : ""}`, "data-testid": testid, role: "img" }, [
    el("span", { class: "cb-ramp", style: `background: ${gradient(horizontal ? "to right" : "to top", diverging ? DIVERGING : VIRIDIS)}` }),
    el("span", { class: "cb-ticks" }),
    el("span", { class: "cb-label" }),
  ]);
}

/**
 * Show zmax (the top colour), the scale (log: `decades` powers of ten below the top,
 * anything smaller at the bottom colour) and what the colour measures.
 */
export function setColourBar(bar, { zmax, log = false, decades = 4, label = "weight", diverging = false }) {
  const values = ticks(zmax, log, decades, diverging);
  bar.querySelector(".cb-ticks").replaceChildren(...values.map((v, k) => el("span", { text: `${k === values.length - 1 && log ? "≤ " : ""}${number(v)}` })));
  const scale = diverging ? "linear scale, 0 in the middle" : log ? `log scale, ${decades} powers of ten` : "linear scale";
  bar.querySelector(".cb-label").textContent = `${label} (${scale})`;
  Object.assign(bar.dataset, { zmax: String(zmax), scale: diverging ? "diverging" : log ? "log" : "linear" });
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
