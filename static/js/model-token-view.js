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

/**
 * Draw the token view into `section` (the page's token-view card).
 * view: {labels (one per token shown), tokens (plain text), generated (flags or null),
 *   positions, causal, layers (Map n -> {heads}), L, H, chosen (index or null),
 *   layer (the head view's layer), when ("written" | "input"), hidden (a hide note)}
 * handlers: {onChoose(i), onMode(mode)}. Resolves when drawn.
 */
export async function drawTokenView(section, view, { onChoose, onMode, headViewMode }) {
  const $ = (id) => byTestId(id, section);
  const { labels, tokens, generated, positions, causal, layers, L, H, chosen, layer, when } = view;
  const controls = $("tv-controls");
  const body = $("tv-body");
  const what = $("tv-what");
  if (chosen === null || chosen === undefined || chosen >= labels.length) {
    controls.hidden = true;
    body.hidden = true;
    delete section.dataset.query;
    what.textContent = "Choose a token (in the list above, or a row label or cell of the large map) to see its weights in every head.";
    return;
  }
  const isGenerated = Boolean(generated && generated[chosen]);
  const row = rowFor({ s: chosen, generated, positions, when, causal, count: labels.length });
  controls.hidden = false;
  $("tv-when").hidden = !isGenerated;
  for (const radio of section.querySelectorAll("input[name='tv-when']")) radio.checked = radio.value === when;
  fillLayers($("tv-layer"), L, layer);
  const token = quote(tokens[chosen]);
  if (row.query === null) {
    body.hidden = true;
    delete section.dataset.query;
    what.textContent = `The token before ${token} is hidden (“Hide special and first tokens”): turn that off to see what the model looked at when it wrote ${token}.`;
    return;
  }
  body.hidden = false;
  section.dataset.query = String(row.query);
  section.dataset.keys = String(row.keys);
  section.dataset.mode = row.mode;
  what.textContent =
    row.mode === "written"
      ? `What the model looked at when it wrote ${token}: the weights of ${quote(tokens[row.query])}, the token before it, which was the model's input at that step. It could read ${row.keys} token${row.keys === 1 ? "" : "s"}.`
      : `What ${token} (token ${chosen + 1} of ${labels.length}) reads${causal ? ": a decoder's token reads only itself and the tokens before it" : ""}.`;
  const keys = labels.slice(0, row.keys);
  const data = layers.get(layer);
  $("tv-layer-title").textContent = `Every head of layer ${layer}`;
  if (data) {
    drawHeadView(
      $("headview"),
      {
        queries: labels,
        keys,
        query: row.query,
        rows: Array.from({ length: H }, (_, h) => headRow(data.heads, h, row.query, row.keys)),
      },
      { mode: headViewMode, onSelect: (i) => onChoose(i), onMode },
    );
  }
  // Every layer × every head: one row each, over the keys the query could read.
  const z = [];
  const rowLabels = [];
  for (let l = 1; l <= L; l++) {
    const d = layers.get(l);
    for (let h = 0; h < H; h++) {
      z.push(d ? headRow(d.heads, h, row.query, row.keys) : new Array(row.keys).fill(null));
      rowLabels.push(`L${l} H${h + 1}`);
    }
  }
  await drawHeatmap($("tv-strip"), {
    z,
    rows: rowLabels,
    cols: keys,
    kind: "weights",
    rowTitle: "layer, head",
    colTitle: "attended to (key)",
    filename: "model-token-row",
    uirevision: `${L}x${H}:${keys.join("|")}`,
  });
  $("tv-strip").dataset.query = String(row.query);
}
