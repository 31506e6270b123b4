// Two texts, one model (or one text, two checkpoints of a family such as two training
// snapshots): the same head's map for each, side by side, and their difference B − A on
// a diverging scale.  Two calls to POST /api/model/attention (one layer, one head, pooled
// to at most POOL cells a side, as the page's long-text maps are).
//
// The difference is taken cell by cell, row i and column j of one map against row i and
// column j of the other: it is shown only when both maps have the same number of tokens
// (the same tokenization length); a position whose tokens differ is named.  Texts of
// different lengths show the two maps alone, and say why.

import { post } from "./api.js";
import { el } from "./dom.js";
import { drawHeatmap } from "./heatmap.js";
import { visibleToken } from "./labels.js";

const POOL = 128;

/** Labels of a map's rows: a token each, or a pooled block's first token and its span. */
export function blockLabels(tokens, block) {
  if (block <= 1) return tokens.map((t, i) => `${visibleToken(t)}·${i}`);
  const out = [];
  for (let start = 0; start < tokens.length; start += block) {
    out.push(`${visibleToken(tokens[start])} [${start}–${Math.min(start + block, tokens.length) - 1}]`);
  }
  return out;
}

/** B − A cell by cell (maps of the same shape); null cells (masked) stay null. */
export function difference(a, b) {
  return a.map((row, i) => row.map((v, j) => (v === null || b[i][j] === null ? null : b[i][j] - v)));
}

/** Why no difference map, or null when there is one: the maps' token counts. */
export function differenceProblem(tokensA, tokensB) {
  if (tokensA.length === tokensB.length) return null;
  return (
    `A has ${tokensA.length} tokens and B ${tokensB.length}: the difference is taken cell by cell ` +
    "(row i, column j of B minus the same cell of A), which needs the same number of tokens " +
    "in both, so only the two maps are shown. Give texts that tokenize to the same length " +
    "(or one text and two checkpoints of one family) for the difference."
  );
}

function field(label, control, id) {
  control.id = id;
  return el("div", { class: "field" }, [el("label", { for: id, text: label }), control]);
}

function modelOptions(models, defaultModel) {
  const options = [el("option", { value: "", text: "the same model" })];
  for (const m of models.filter((x) => x.supported !== false && x.name !== undefined)) {
    options.push(el("option", { value: m.name, text: m.name === defaultModel ? `${m.name} (default)` : m.name }));
  }
  return options;
}

const PANELS = ["a", "b", "diff"];

/** The form's controls: the two texts (no length cap here: the server's limit follows the
 * model's token limit, and its 422 is shown), B's model, the layer, the head and the error line. */
function controls(models, defaultModel) {
  return {
    textA: el("textarea", { rows: 2, "data-testid": "tt-text-a" }),
    textB: el("textarea", { rows: 2, "data-testid": "tt-text-b" }),
    modelB: el("select", { "data-testid": "tt-model-b" }, modelOptions(models, defaultModel)),
    layer: el("input", { type: "number", min: 1, step: 1, value: 1, "data-testid": "tt-layer", inputmode: "numeric" }),
    head: el("input", { type: "number", min: 1, step: 1, value: 1, "data-testid": "tt-head", inputmode: "numeric" }),
    run: el("button", { type: "submit", "data-testid": "tt-run", text: "Compare" }),
    error: el("p", { class: "error", role: "alert", "data-testid": "tt-error" }),
  };
}

/** The form of `parts`' controls. */
function form(parts) {
  return el("form", { class: "tt-form", "data-testid": "tt-form" }, [
    field("Text A", parts.textA, "tt-text-a"),
    field("Text B (empty: text A again, for two checkpoints)", parts.textB, "tt-text-b"),
    el("div", { class: "tt-row" }, [field("Model for B", parts.modelB, "tt-model-b"), field("Layer", parts.layer, "tt-layer"), field("Head", parts.head, "tt-head"), parts.run]),
    parts.error,
  ]);
}

/** The card's parts, built into `card`: the form, its status and note, and the three panels (A, B, B − A). */
function twoTextsParts(card, models, defaultModel) {
  const parts = controls(models, defaultModel);
  parts.status = el("p", { class: "hint", role: "status", "data-testid": "tt-status" });
  parts.note = el("p", { class: "notice", "data-testid": "tt-note", hidden: true });
  parts.plots = PANELS.map((k) => el("div", { class: "plot tt-plot", "data-testid": `tt-plot-${k}` }));
  parts.titles = ["A", "B", "B − A"].map((t, i) => el("h3", { "data-testid": `tt-title-${PANELS[i]}`, text: t }));
  parts.form = form(parts);
  parts.panels = parts.plots.map((p, i) => el("figure", { class: "tt-panel", "data-testid": `tt-panel-${PANELS[i]}` }, [parts.titles[i], p]));
  card.replaceChildren(
    el("h2", { id: "tt-title", text: "Two texts, one head" }),
    el("p", { class: "hint", text: "The same head's map for two texts (or for one text in two checkpoints of one family, such as two training snapshots with the same tokenizer), side by side, and B − A: red where B's row reads a token more than A's, blue where less." }),
    parts.form,
    parts.status,
    parts.note,
    el("div", { class: "tt-maps" }, parts.panels),
  );
  card.setAttribute("aria-labelledby", "tt-title");
  return parts;
}

/** Start from the page's text, layer and head. */
function startFromPage(parts, now) {
  parts.textA.value = now.text;
  parts.layer.value = String(now.layer);
  parts.head.value = /^\d+$/.test(String(now.head)) ? String(now.head) : "1";
}

/** The form's inputs as the URL keeps them ({a, b, model, layer, head}: model-state.js). */
function inputsOf(parts) {
  return { a: parts.textA.value, b: parts.textB.value, model: parts.modelB.value, layer: Number(parts.layer.value), head: Number(parts.head.value) };
}

/** A comparison the URL kept, back in the form. */
function fillFrom(parts, saved) {
  parts.textA.value = saved.a;
  parts.textB.value = saved.b;
  parts.modelB.value = saved.model;
  parts.layer.value = String(saved.layer);
  parts.head.value = String(saved.head);
}

/** One head's map of `text` from `model` (empty: the server's default), pooled as the page's long maps. */
function askMap(parts, model, text) {
  return post("/api/model/attention", { ...(model ? { model } : {}), text, layers: [Number(parts.layer.value)], heads: [Number(parts.head.value)], pool: POOL, head_average: false });
}

/** An error in words: a 422's fields, each with its message, or the error's message. */
function errorWords(err) {
  return err.detail ? err.detail.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(" → ")}: ${d.msg}`).join(" ") : String(err.message || err);
}

/** Compare: both maps asked for at once, then drawn (a later compare wins). */
async function compare(t) {
  const { card, parts } = t;
  const mine = ++t.seq;
  parts.error.textContent = "";
  parts.note.hidden = true;
  const modelA = t.page().model;
  const b = parts.modelB.value || modelA;
  const texts = [parts.textA.value, parts.textB.value.trim() ? parts.textB.value : parts.textA.value];
  parts.status.textContent = "Running the model…";
  card.dataset.ready = "false";
  let answers;
  try {
    answers = await Promise.all([askMap(parts, modelA, texts[0]), askMap(parts, b, texts[1])]);
  } catch (err) {
    if (mine !== t.seq) return;
    parts.status.textContent = "";
    parts.error.textContent = errorWords(err);
    return;
  }
  if (mine !== t.seq) return;
  await draw(t, answers);
  card.dataset.ready = "true";
}

/** The two maps, A and B, each with its title; returns their cells and labels. */
async function drawBoth(parts, a, b) {
  const maps = [a.attentions[0][0], b.attentions[0][0]];
  const labels = [a, b].map((x) => blockLabels(x.tokens, x.pooled ? x.pooled.block[0] : 1));
  const [L, H] = [parts.layer.value, parts.head.value];
  parts.titles[0].textContent = `A: ${a.model}, layer ${L}, head ${H} (${a.tokens.length} tokens)`;
  parts.titles[1].textContent = `B: ${b.model}, layer ${L}, head ${H} (${b.tokens.length} tokens)`;
  const common = { kind: "weights", rowTitle: "attending (query)", colTitle: "attended to (key)" };
  await drawHeatmap(parts.plots[0], { ...common, z: maps[0], rows: labels[0], cols: labels[0], filename: "two-texts-a" });
  await drawHeatmap(parts.plots[1], { ...common, z: maps[1], rows: labels[1], cols: labels[1], filename: "two-texts-b" });
  return { maps, labels };
}

/** The note above a difference: where the tokens differ, and that pooled maps differ by block. */
function differenceNote(a, b) {
  const pooled = a.pooled && a.pooled.block[0] > 1 ? ` Both maps are pooled (a cell is the largest weight of a ${a.pooled.block[0]} × ${a.pooled.block[0]} block), so the difference is of those cells.` : "";
  const differ = a.tokens.flatMap((t, i) => (t === b.tokens[i] ? [] : [i]));
  const where = differ.length ? `The tokens differ at position${differ.length === 1 ? "" : "s"} ${differ.slice(0, 12).join(", ")}${differ.length > 12 ? "…" : ""}: the difference compares those positions' rows and columns all the same.` : "";
  return where + pooled;
}

/** Both maps, then B − A when the token counts match (else why not). */
async function draw(t, [a, b]) {
  const { card, parts } = t;
  const { maps, labels } = await drawBoth(parts, a, b);
  const problem = differenceProblem(a.tokens, b.tokens);
  parts.panels[2].hidden = Boolean(problem);
  if (problem) {
    parts.note.textContent = problem;
    parts.note.hidden = false;
    parts.status.textContent = "";
    card.dataset.diff = "none";
    return;
  }
  const note = differenceNote(a, b);
  parts.note.hidden = note === "";
  parts.note.textContent = note;
  parts.titles[2].textContent = "B − A (red: B reads more, blue: A reads more)";
  await drawHeatmap(parts.plots[2], {
    kind: "signed",
    z: difference(maps[0], maps[1]),
    rows: labels[1],
    cols: labels[1],
    rowTitle: "attending (query)",
    colTitle: "attended to (key)",
    scaleTitle: "B − A",
    filename: "two-texts-difference",
  });
  card.dataset.diff = "shown";
  parts.status.textContent = "";
}

/**
 * The card, made into `card` (a section of /model).  page(): {model, text, layer, head}
 * of the page's large map (its model: null for the server's default); saved: the
 * comparison the URL kept (or null); onCompare(inputs): a comparison was asked for (the
 * page keeps its inputs in the URL).  Returns {restore()}: the saved comparison run
 * again (when the card is shown: not for an encoder-decoder).
 */
export function mountTwoTexts(card, { models, defaultModel, page, saved = null, onCompare = () => {} }) {
  const t = { card, page, parts: twoTextsParts(card, models, defaultModel), seq: 0 };
  if (saved) fillFrom(t.parts, saved);
  else startFromPage(t.parts, page()); // the page's text, layer and head to start from
  t.parts.form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    onCompare(inputsOf(t.parts));
    compare(t);
  });
  return {
    restore() {
      if (saved && !card.hidden) compare(t);
    },
  };
}
