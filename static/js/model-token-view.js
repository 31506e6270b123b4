// From a token to what it reads, on the model page: for one chosen token, every
// head's weights from it in one layer (the head view: lines or bars, headview.js)
// and in every layer at once (one heatmap row per layer and head).
//
// A generated token is shown "when it was written" by default: the row of the
// token before it, which was the model's input at the step that wrote it (row i
// of a decoder's map is what token i read as input).

import { byTestId, el } from "./dom.js";
import { drawHeadView } from "./headview.js";
import { drawHeatmap } from "./heatmap.js";
import { drawCells } from "./colour.js";
import { COMBINE, combinedRow } from "./model-multi-token.js";

// A long row: past HEADVIEW_KEYS keys the head view shows the STRONGEST keys only (its
// lines and bars need a label per key), and past STRIP_KEYS keys the every-layer strip
// is drawn on a canvas, a pixel a cell (Plotly would get thousands of columns).
export const HEADVIEW_KEYS = 48;
export const STRONGEST = 24;
export const STRIP_KEYS = 256;

/** The `count` columns holding the largest weight of any row (rows: arrays), in order. */
export function strongestColumns(rows, count) {
  const keys = rows.length ? rows[0].length : 0;
  const best = new Float32Array(keys);
  for (const row of rows) for (let j = 0; j < keys; j++) if (row[j] > best[j]) best[j] = row[j];
  const order = Array.from({ length: keys }, (_, j) => j).sort((a, b) => best[b] - best[a] || a - b);
  return order.slice(0, count).sort((a, b) => a - b);
}

/**
 * Which row of the maps to show for token `s`, and over how many keys.
 * Returns {query, keys, mode: "input" | "written"} or {query: null, mode: "written"}
 * when the token before a generated one is hidden.
 */
export function rowFor({ s, generated, positions, when, causal, count }) {
  if (generated && generated[s] && when === "written") {
    if (s === 0 || positions[s - 1] !== positions[s] - 1) return { query: null, keys: 0, mode: "written" };
    return { query: s - 1, keys: s, mode: "written" };
  }
  // A decoder's row reads only itself and what came before: the rest is masked.
  return { query: s, keys: causal ? s + 1 : count, mode: "input" };
}

/** One row of a decoded (H, T, T) layer: head h, query row q, the first `keys` columns. */
export function headRow(decoded, h, q, keys) {
  const T = decoded.shape[decoded.shape.length - 1];
  const start = h * T * T + q * T;
  return Array.from(decoded.values.subarray(start, start + keys));
}

function fillLayers(select, count, value) {
  if (select.options.length !== count) {
    select.replaceChildren(...Array.from({ length: count }, (_, i) => el("option", { value: i + 1, text: `layer ${i + 1}` })));
  }
  select.value = String(value);
}

const quote = (t) => `“${t}”`;

/** Layer data held on the page (Map n -> {heads}) as view.row: (layer, h, query, keys) -> weights or null. */
export const rowsOfLayers = (layers) => (l, h, q, keys) => (layers.has(l) ? headRow(layers.get(l).heads, h, q, keys) : null);

/**
 * Draw the token view into `section` (the page's token-view card).
 * view: {labels (one per token shown), tokens (plain text), generated (flags or null),
 *   positions, causal, row ((layer, head 0-based, query, keys) -> weights or null: see
 *   rowsOfLayers), L, H, chosen (index or null),
 *   layer (the head view's layer), when ("written" | "input"), hidden (a hide note)}
 * handlers: {onChoose(i), onMode(mode)}. Resolves when drawn.
 */
export async function drawTokenView(section, view, handlers) {
  if (view.queries && view.queries.length > 1) return drawSeveral(section, view, handlers);
  delete section.dataset.queries;
  return drawOne(section, view, handlers);
}

/** Each chosen token's row ({query, keys} from rowFor), in the order chosen. */
export function rowsFor(view) {
  const { queries, generated, positions, when, causal, labels } = view;
  return queries.map((s) => rowFor({ s, generated, positions, when, causal, count: labels.length }));
}

/** The token view's section, what it shows and its handlers, with $ (an element of the section by test id). */
function tokenView(section, view, handlers) {
  return { section, view, handlers, $: (id) => byTestId(id, section) };
}

/** A head-view key label: the token's label with its position (once). */
const keyLabel = (labels, j) => (labels[j].endsWith(`·${j}`) ? labels[j] : `${labels[j]}·${j}`);

/** The head view's title: a long row (past HEADVIEW_KEYS keys) shows the strongest keys only. */
function layerTitle(tv, keys, reads) {
  const { layer } = tv.view;
  tv.$("tv-layer-title").textContent = keys > HEADVIEW_KEYS
    ? `Every head of layer ${layer}: the ${STRONGEST} tokens ${reads} most, of ${keys}`
    : `Every head of layer ${layer}`;
}

/** A chosen row hidden by "Hide special and first tokens": the body hidden, and why. */
function hideRow(tv, key, words) {
  tv.$("tv-body").hidden = true;
  delete tv.section.dataset[key];
  tv.$("tv-what").textContent = words;
}

/** Every layer × every head: one row each (rowAt(l, h), or nulls), over `keys` keys. */
function stripRows({ L, H }, rowAt, keys) {
  const z = [];
  const rowLabels = [];
  for (let l = 1; l <= L; l++) {
    for (let h = 0; h < H; h++) {
      z.push(rowAt(l, h) || new Array(keys).fill(null));
      rowLabels.push(`L${l} H${h + 1}`);
    }
  }
  return { z, rowLabels };
}

/** What several chosen tokens read, in words. */
function severalWords({ tokens, queries, combine, causal }) {
  const names = queries.map((q) => `${quote(tokens[q])} (${q})`).join(", ");
  return (
    `What ${queries.length} tokens read, their rows ${COMBINE[combine]}: ${names}. ` +
    `Each key's weight is the ${combine === "sum" ? "sum" : "mean"} of the chosen tokens' weights for it` +
    (causal ? "; a decoder's token reads only up to itself, so the keys after it count 0 for it." : ".")
  );
}

/** The head view of several tokens' combined rows (`of(l, h)`): the strongest keys only past HEADVIEW_KEYS. */
function drawSeveralHeads(tv, of, keys) {
  const { labels, layer, H, queries, combine } = tv.view;
  const headRows = Array.from({ length: H }, (_, h) => of(layer, h));
  if (!headRows.every(Boolean)) return;
  const picked = keys > HEADVIEW_KEYS ? strongestColumns(headRows, STRONGEST) : Array.from({ length: keys }, (_, j) => j);
  drawHeadView(
    tv.$("headview"),
    {
      queries: [`${queries.length} tokens (${combine === "sum" ? "sum" : "mean"})`],
      keys: picked.map((j) => keyLabel(labels, j)),
      query: 0,
      rows: headRows.map((r) => picked.map((j) => r[j])),
    },
    { mode: tv.handlers.headViewMode, onSelect: () => {}, onMode: tv.handlers.onMode },
  );
}

/**
 * Several tokens (view.queries, 2 or more) as one row: each head's rows of those tokens
 * summed or averaged (view.combine: "sum" | "mean"), over the keys the last of them could read.
 */
async function drawSeveral(section, view, handlers) {
  const tv = tokenView(section, view, handlers);
  const { labels, row: rowOf, L, H, queries, combine } = view;
  tv.$("tv-controls").hidden = false;
  tv.$("tv-when").hidden = !(view.generated && queries.some((q) => view.generated[q]));
  fillLayers(tv.$("tv-layer"), L, view.layer);
  const rows = rowsFor(view);
  if (rows.some((r) => r.query === null)) {
    return hideRow(tv, "queries", `A chosen token's row is hidden (“Hide special and first tokens”): turn that off, or remove it from the chosen tokens.`);
  }
  tv.$("tv-body").hidden = false;
  const keys = Math.max(...rows.map((r) => r.keys));
  section.dataset.queries = rows.map((r) => r.query).join(",");
  section.dataset.combine = combine;
  section.dataset.keys = String(keys);
  delete section.dataset.query;
  tv.$("tv-what").textContent = severalWords(view);
  const of = (l, h) => combinedRow(rows.map((r) => rowOf(l, h, r.query, r.keys)), combine);
  layerTitle(tv, keys, "the chosen ones read");
  drawSeveralHeads(tv, of, keys);
  const { z, rowLabels } = stripRows(view, of, keys);
  // A sum of n rows lies in 0..n: its scale is that, and says so.
  await drawStripOf(section, { z, rowLabels, labels, keys, L, H, query: section.dataset.queries, zmax: combine === "sum" ? queries.length : 1 });
}

/** No token chosen: the controls and body hidden, and how to choose one. */
function showNoChoice(tv) {
  tv.$("tv-controls").hidden = true;
  tv.$("tv-body").hidden = true;
  delete tv.section.dataset.query;
  tv.$("tv-what").textContent = "Choose a token (in the list above, or a row label or cell of the large map) to see its weights in every head.";
}

/** What one chosen token's row is, in words: as input, or as it was written. */
function oneWords({ tokens, labels, chosen, causal }, row) {
  const token = quote(tokens[chosen]);
  return row.mode === "written"
    ? `What the model looked at when it wrote ${token}: the weights of ${quote(tokens[row.query])}, the token before it, which was the model's input at that step. It could read ${row.keys} token${row.keys === 1 ? "" : "s"}.`
    : `What ${token} at position ${chosen} (of ${labels.length} tokens, counted from 0 as in the labels) reads${causal ? ": a decoder's token reads only itself and the tokens before it" : ""}.`;
}

/** The head view of one token's row: every key (clicking one chooses it), or the strongest of a long row. */
function drawOneHeads(tv, row) {
  const { labels, row: rowOf, H, layer } = tv.view;
  const { onChoose, onMode, headViewMode } = tv.handlers;
  const rows = Array.from({ length: H }, (_, h) => rowOf(layer, h, row.query, row.keys));
  if (!rows.every(Boolean)) return;
  const long = row.keys > HEADVIEW_KEYS;
  // A long row: the strongest keys only, labelled with their position.
  const picked = long ? strongestColumns(rows, STRONGEST) : null;
  drawHeadView(
    tv.$("headview"),
    long
      ? { queries: [labels[row.query]], keys: picked.map((j) => keyLabel(labels, j)), query: 0, rows: rows.map((r) => picked.map((j) => r[j])) }
      : { queries: labels, keys: labels.slice(0, row.keys), query: row.query, rows },
    { mode: headViewMode, onSelect: long ? () => {} : (i) => onChoose(i), onMode },
  );
}

/** One chosen token (view.chosen): its row in every head of a layer, and in every layer. */
async function drawOne(section, view, handlers) {
  const tv = tokenView(section, view, handlers);
  const { labels, tokens, generated, positions, causal, row: rowOf, L, H, chosen, when } = view;
  if (chosen === null || chosen === undefined || chosen >= labels.length) return showNoChoice(tv);
  const row = rowFor({ s: chosen, generated, positions, when, causal, count: labels.length });
  tv.$("tv-controls").hidden = false;
  tv.$("tv-when").hidden = !(generated && generated[chosen]);
  for (const radio of section.querySelectorAll("input[name='tv-when']")) radio.checked = radio.value === when;
  fillLayers(tv.$("tv-layer"), L, view.layer);
  if (row.query === null) {
    const token = quote(tokens[chosen]);
    return hideRow(tv, "query", `The token before ${token} is hidden (“Hide special and first tokens”): turn that off to see what the model looked at when it wrote ${token}.`);
  }
  tv.$("tv-body").hidden = false;
  section.dataset.query = String(row.query);
  section.dataset.keys = String(row.keys);
  section.dataset.mode = row.mode;
  tv.$("tv-what").textContent = oneWords(view, row);
  layerTitle(tv, row.keys, "it reads");
  drawOneHeads(tv, row);
  // Every layer × every head: one row each, over the keys the query could read.
  const { z, rowLabels } = stripRows(view, (l, h) => rowOf(l, h, row.query, row.keys), row.keys);
  await drawStripOf(section, { z, rowLabels, labels, keys: row.keys, L, H, query: String(row.query), zmax: 1 });
}

/** The every-layer strip: a heatmap, or a canvas past STRIP_KEYS keys.  zmax: the
 * colour scale's top (1 for weights and their mean; n for a sum of n rows). */
async function drawStripOf(section, { z, rowLabels, labels, keys, L, H, query, zmax }) {
  const strip = byTestId("tv-strip", section);
  const canvasStrip = byTestId("tv-strip-canvas", section);
  const cols = labels.slice(0, keys);
  strip.hidden = keys > STRIP_KEYS;
  canvasStrip.hidden = !strip.hidden;
  if (strip.hidden) drawStrip(canvasStrip, { z, rowLabels, labels, keys });
  else {
    await drawHeatmap(strip, {
      z,
      rows: rowLabels,
      cols,
      kind: "weights",
      ...(zmax === 1 ? {} : { zmin: 0, zmax, scaleTitle: `sum of ${zmax} rows: 0–${zmax}` }),
      rowTitle: "layer, head",
      colTitle: "attended to (key)",
      filename: "model-token-row",
      uirevision: `${L}x${H}:${cols.join("|")}`,
    });
  }
  strip.dataset.query = query;
  canvasStrip.dataset.query = query;
}

/**
 * The every-layer strip of a long row on a canvas: a row per layer and head, a pixel per
 * key, each row coloured to its own largest weight (a long row's weights are small);
 * hovering names the head, the key and the weight.
 */
function drawStrip(box, { z, rowLabels, labels, keys }) {
  let canvas = box.querySelector("canvas");
  const readout = box.querySelector("[data-testid='tv-strip-readout']") || el("p", { class: "hint", "data-testid": "tv-strip-readout", role: "status" });
  if (!canvas) {
    canvas = el("canvas", { class: "tv-strip-map", "data-testid": "tv-strip-map", width: 1, height: 1, role: "img" });
    box.replaceChildren(canvas, readout);
    canvas.addEventListener("pointermove", (ev) => {
      const b = canvas.getBoundingClientRect();
      const i = Math.floor(((ev.clientY - b.top) / b.height) * canvas._rows.length);
      const j = Math.floor(((ev.clientX - b.left) / b.width) * canvas.width);
      const v = canvas._rows[i] && canvas._rows[i][j];
      readout.textContent = v === undefined || v === null ? "" : `${canvas._names[i]} → ${canvas._labels[j]} (${j}): ${v.toFixed(5)}`;
    });
  }
  const flat = new Float32Array(z.length * keys);
  const top = new Float32Array(z.length);
  z.forEach((r, i) => {
    for (let j = 0; j < keys; j++) if (r[j] > top[i]) top[i] = r[j];
    for (let j = 0; j < keys; j++) flat[i * keys + j] = r[j] === null ? 0 : r[j] / Math.max(top[i], 1e-6);
  });
  drawCells(canvas, flat, { rows: z.length, cols: keys, T: keys, zmax: 1 });
  canvas.style.height = `${Math.min(480, Math.max(48, z.length * 8))}px`;
  Object.assign(canvas, { _rows: z, _names: rowLabels, _labels: labels });
  canvas.setAttribute("aria-label", `${z.length} heads × ${keys} tokens: each head's weights from the chosen token, coloured to its own largest weight`);
  readout.textContent = "";
}
