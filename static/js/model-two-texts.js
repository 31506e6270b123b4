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
import { byTestId, el } from "./dom.js";
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

/**
 * The card, made into `card` (a section of /model).  page(): {model, text, layer, head}
 * of the page's large map (its model: null for the server's default).
 */
export function mountTwoTexts(card, { models, defaultModel, page }) {
  const textA = el("textarea", { rows: 2, "data-testid": "tt-text-a", maxlength: 40000 });
  const textB = el("textarea", { rows: 2, "data-testid": "tt-text-b", maxlength: 40000 });
  const modelB = el("select", { "data-testid": "tt-model-b" }, modelOptions(models, defaultModel));
  const layer = el("input", { type: "number", min: 1, step: 1, value: 1, "data-testid": "tt-layer", inputmode: "numeric" });
  const head = el("input", { type: "number", min: 1, step: 1, value: 1, "data-testid": "tt-head", inputmode: "numeric" });
  const run = el("button", { type: "submit", "data-testid": "tt-run", text: "Compare" });
  const error = el("p", { class: "error", role: "alert", "data-testid": "tt-error" });
  const status = el("p", { class: "hint", role: "status", "data-testid": "tt-status" });
  const note = el("p", { class: "notice", "data-testid": "tt-note", hidden: true });
  const plots = ["a", "b", "diff"].map((k) => el("div", { class: "plot tt-plot", "data-testid": `tt-plot-${k}` }));
  const titles = ["A", "B", "B − A"].map((t, i) => el("h3", { "data-testid": `tt-title-${["a", "b", "diff"][i]}`, text: t }));
  const form = el("form", { class: "tt-form", "data-testid": "tt-form" }, [
    field("Text A", textA, "tt-text-a"),
    field("Text B (empty: text A again, for two checkpoints)", textB, "tt-text-b"),
    el("div", { class: "tt-row" }, [field("Model for B", modelB, "tt-model-b"), field("Layer", layer, "tt-layer"), field("Head", head, "tt-head"), run]),
    error,
  ]);
  const panels = plots.map((p, i) => el("figure", { class: "tt-panel", "data-testid": `tt-panel-${["a", "b", "diff"][i]}` }, [titles[i], p]));
  card.replaceChildren(
    el("h2", { id: "tt-title", text: "Two texts, one head" }),
    el("p", { class: "hint", text: "The same head's map for two texts (or for one text in two checkpoints of one family, such as two training snapshots with the same tokenizer), side by side, and B − A: red where B's row reads a token more than A's, blue where less." }),
    form,
    status,
    note,
    el("div", { class: "tt-maps" }, panels),
  );
  card.setAttribute("aria-labelledby", "tt-title");
  let seq = 0;
  const now = page(); // the page's text, layer and head to start from
  textA.value = now.text;
  layer.value = String(now.layer);
  head.value = /^\d+$/.test(String(now.head)) ? String(now.head) : "1";

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const mine = ++seq;
    error.textContent = "";
    note.hidden = true;
    const modelA = page().model;
    const b = modelB.value || modelA;
    const texts = [textA.value, textB.value.trim() ? textB.value : textA.value];
    const ask = (model, text) =>
      post("/api/model/attention", { ...(model ? { model } : {}), text, layers: [Number(layer.value)], heads: [Number(head.value)], pool: POOL, head_average: false });
    status.textContent = "Running the model…";
    card.dataset.ready = "false";
    let answers;
    try {
      answers = await Promise.all([ask(modelA, texts[0]), ask(b, texts[1])]);
    } catch (err) {
      if (mine !== seq) return;
      status.textContent = "";
      error.textContent = err.detail ? err.detail.map((d) => `${(d.loc || []).filter((p) => p !== "body").join(" → ")}: ${d.msg}`).join(" ") : String(err.message || err);
      return;
    }
    if (mine !== seq) return;
    await draw(answers);
    card.dataset.ready = "true";
  });

  async function draw([a, b]) {
    const maps = [a.attentions[0][0], b.attentions[0][0]];
    const labels = [a, b].map((x) => blockLabels(x.tokens, x.pooled ? x.pooled.block[0] : 1));
    const [L, H] = [layer.value, head.value];
    titles[0].textContent = `A: ${a.model}, layer ${L}, head ${H} (${a.tokens.length} tokens)`;
    titles[1].textContent = `B: ${b.model}, layer ${L}, head ${H} (${b.tokens.length} tokens)`;
    const common = { kind: "weights", rowTitle: "attending (query)", colTitle: "attended to (key)" };
    await drawHeatmap(plots[0], { ...common, z: maps[0], rows: labels[0], cols: labels[0], filename: "two-texts-a" });
    await drawHeatmap(plots[1], { ...common, z: maps[1], rows: labels[1], cols: labels[1], filename: "two-texts-b" });
    const problem = differenceProblem(a.tokens, b.tokens);
    panels[2].hidden = Boolean(problem);
    const pooled = a.pooled && a.pooled.block[0] > 1 ? ` Both maps are pooled (a cell is the largest weight of a ${a.pooled.block[0]} × ${a.pooled.block[0]} block), so the difference is of those cells.` : "";
    if (problem) {
      note.textContent = problem;
      note.hidden = false;
      status.textContent = "";
      card.dataset.diff = "none";
      return;
    }
    const differ = a.tokens.flatMap((t, i) => (t === b.tokens[i] ? [] : [i]));
    note.hidden = differ.length === 0 && !pooled;
    note.textContent =
      (differ.length ? `The tokens differ at position${differ.length === 1 ? "" : "s"} ${differ.slice(0, 12).join(", ")}${differ.length > 12 ? "…" : ""}: the difference compares those positions' rows and columns all the same.` : "") + pooled;
    titles[2].textContent = "B − A (red: B reads more, blue: A reads more)";
    await drawHeatmap(plots[2], {
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
    status.textContent = "";
  }
  return card;
}
