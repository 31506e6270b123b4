// The drawing of /model's encoder-decoder card (model-stacks.js): one stack's layer ×
// head thumbnails, its large map (a table of labelled cells, or a canvas past
// MAX_TABLE_CELLS) with its colour bar, and the alignment view (one written target
// word's row of the cross-attention in every layer and head).  c: the card (its
// elements, view {stack, layer, head, word, when} and data).  Token text goes in
// through textContent.

import { colourBar, setColourBar } from "./colour-bar.js";
import { css, drawCells, mapMax, rgbAt } from "./colour.js";
import { el } from "./dom.js";
import { tokenLabels } from "./labels.js";

// Above this many cells the large map is a canvas (no per-cell labels).
const MAX_TABLE_CELLS = 6400;
const lightText = (t) => t < 0.6;
const top = (values) => Math.max(mapMax(values), 1e-6);

/** Draw a rows × cols map (Float32Array, row-major) into a canvas, one pixel per cell. */
function drawRect(canvas, values, rows, cols, { causal = false } = {}) {
  drawCells(canvas, values, { rows, cols, zmax: top(values), causal });
}

/** The mean over heads of a decoded (H, T, S) tensor, as a Float32Array (T * S). */
function headMean(decoded) {
  const [H, T, S] = decoded.shape;
  const mean = new Float32Array(T * S);
  for (let h = 0; h < H; h++) {
    const base = h * T * S;
    for (let k = 0; k < T * S; k++) mean[k] += decoded.values[base + k] / H;
  }
  return mean;
}

export function oneMap(decoded, head) {
  if (head === "mean") return headMean(decoded);
  const [, T, S] = decoded.shape;
  return decoded.values.subarray((head - 1) * T * S, head * T * S);
}

/** A stack's row and column tokens. */
export function tokensOf(data, stack) {
  const rows = stack === "encoder" ? data.source : data.target;
  const cols = stack === "decoder" ? data.target : data.source;
  return { rows, cols };
}

const mapTitle = (layer, head) => (head === "mean" ? `Layer ${layer}, mean of heads` : `Layer ${layer}, head ${head}`);

/** One thumbnail button; open(layer, head) shows its map large. */
function thumb(c, layer, head, { rows, cols }, open) {
  const { view, data } = c;
  const name = mapTitle(layer, head);
  const canvas = el("canvas", { width: 1, height: 1, "aria-hidden": "true" });
  const on = layer === view.layer && head === view.head;
  const testid = `s2s-map-L${layer}-${head === "mean" ? "mean" : `H${head}`}`;
  const button = el("button", { type: "button", class: "map-btn", "data-testid": testid, "aria-label": name, title: name, "aria-pressed": on ? "true" : "false", onclick: () => open(layer, head) }, [canvas]);
  drawRect(canvas, oneMap(data.maps[view.stack][layer - 1], head), rows.length, cols.length, { causal: view.stack === "decoder" });
  return button;
}

/** The stack's thumbnails: a row per layer, a column per head and the mean. */
export function drawGrid(c, open) {
  const { view, data } = c;
  const heads = [...Array.from({ length: data.heads }, (_, i) => i + 1), "mean"];
  const cells = [el("span", { class: "col-label", "aria-hidden": "true" })];
  for (const head of heads) cells.push(el("span", { class: "col-label", text: head === "mean" ? "mean" : `H${head}` }));
  const tokens = tokensOf(data, view.stack);
  for (let layer = 1; layer <= data.maps[view.stack].length; layer++) {
    cells.push(el("span", { class: "row-label", text: `Layer ${layer}` }));
    for (const head of heads) cells.push(thumb(c, layer, head, tokens, open));
  }
  c.grid.style.gridTemplateColumns = `3.4rem repeat(${heads.length}, 42px)`;
  c.grid.replaceChildren(...cells);
}

/** The large map as a table: a labelled, coloured cell per pair (a decoder's future masked). */
function mapTable(table, values, { rows, cols }, stack) {
  const zmax = top(values);
  const rowLabels = tokenLabels(rows);
  const colLabels = tokenLabels(cols);
  const head = el("tr", {}, [el("th", { scope: "col", class: "corner", text: "" }), ...colLabels.map((label) => el("th", { scope: "col", class: "col", text: label }))]);
  const cell = (i, j) => {
    if (stack === "decoder" && j > i) return el("td", { class: "masked", title: "masked" });
    const v = values[i * cols.length + j];
    return el("td", { style: `background: ${css(rgbAt(v / zmax))}`, title: `${rowLabels[i]} → ${colLabels[j]}: ${v.toFixed(3)}`, "data-weight": v.toFixed(4) });
  };
  const body = rows.map((_, i) => el("tr", {}, [el("th", { scope: "row", text: rowLabels[i] }), ...cols.map((_c, j) => cell(i, j))]));
  table.replaceChildren(el("thead", {}, [head]), el("tbody", {}, body));
}

/** The chosen map large, with its colour bar (each map coloured to its own largest weight). */
export function drawLarge(c) {
  const { $, view, data } = c;
  const { stack, layer, head } = view;
  const tokens = tokensOf(data, stack);
  const values = oneMap(data.maps[stack][layer - 1], head);
  $("s2s-zoom-title").textContent = `${mapTitle(layer, head)} (${stack === "cross" ? "cross-attention" : stack})`;
  const table = $("s2s-map");
  Object.assign(table.dataset, { stack, layer: String(layer), head: String(head), rows: String(tokens.rows.length), cols: String(tokens.cols.length) });
  const wrap = table.parentNode;
  for (const old of wrap.querySelectorAll("canvas")) old.remove();
  let bar = wrap.parentNode.querySelector("[data-testid='s2s-colour-bar']");
  if (!bar) {
    bar = colourBar("s2s-colour-bar", { horizontal: true });
    wrap.after(bar);
  }
  setColourBar(bar, { zmax: top(values), label: "weight (the top colour is this map's largest)" });
  if (tokens.rows.length * tokens.cols.length <= MAX_TABLE_CELLS) return mapTable(table, values, tokens, stack);
  table.replaceChildren();
  const canvas = el("canvas", { class: "s2s-big", "data-testid": "s2s-map-canvas" });
  drawRect(canvas, values, tokens.rows.length, tokens.cols.length, { causal: stack === "decoder" });
  wrap.append(canvas);
}

/** One layer's block of the alignment view: each head's (and the mean's) row over the source. */
function alignLayer(data, layer, row, sourceLabels) {
  const S = data.source.length;
  const decoded = data.maps.cross[layer - 1];
  const mean = headMean(decoded);
  const lines = [...Array.from({ length: data.heads }, (_, h) => h + 1), "mean"].map((head) => {
    const values = head === "mean" ? mean : oneMap(decoded, head);
    const rowValues = values.subarray(row * S, (row + 1) * S);
    const zmax = top(rowValues);
    const cells = Array.from(rowValues, (v, j) =>
      el("td", { class: lightText(v / zmax) ? "light" : "", style: `background: ${css(rgbAt(v / zmax))}`, title: `${sourceLabels[j]}: ${v.toFixed(3)}`, "data-weight": v.toFixed(4), text: sourceLabels[j] }),
    );
    return el("tr", { "data-testid": "s2s-align-row", "data-layer": layer, "data-head": head }, [el("th", { scope: "row", text: head === "mean" ? "mean" : `H${head}` }), ...cells]);
  });
  return el("div", { class: "s2s-align-layer" }, [
    el("h4", { text: `Layer ${layer}` }),
    el("div", { class: "s2s-map-wrap" }, [el("table", { class: "s2s-align-table" }, [el("tbody", {}, lines)])]),
  ]);
}

/** The alignment view: the target's words to choose, and what the chosen one read. */
export function drawAlignment(c, choose) {
  const { $, view, data } = c;
  const labels = tokenLabels(data.target);
  const word = (token, k) =>
    el("button", { type: "button", class: "wp-token", "data-testid": "s2s-word", "data-index": k + 1, "aria-pressed": view.word === k + 1 ? "true" : "false", text: labels[k + 1], onclick: () => choose(k + 1) });
  $("s2s-words").replaceChildren(...data.target.slice(1).map(word));
  const out = $("s2s-align-view");
  const what = $("s2s-align-what");
  if (view.word === null) {
    out.replaceChildren();
    out.dataset.token = "";
    what.textContent = "";
    return;
  }
  const i = view.word;
  const row = view.when === "written" ? i - 1 : i;
  Object.assign(out.dataset, { token: String(i), row: String(row) });
  if (row >= data.target.length) {
    what.textContent = `“${labels[i]}” was the last token written: it was never the decoder's input.`;
    out.replaceChildren();
    return;
  }
  what.textContent =
    view.when === "written"
      ? `While writing “${labels[i]}” (the decoder's input was “${labels[row]}”), each head read these source words:`
      : `With “${labels[i]}” as its input (writing the next word), each head read these source words:`;
  const sourceLabels = tokenLabels(data.source);
  out.replaceChildren(...Array.from({ length: data.maps.cross.length }, (_, l) => alignLayer(data, l + 1, row, sourceLabels)));
}
