// "Ablate heads" on /model (POST /api/model/ablate): heads chosen by clicking them in a
// layer × head grid, replaced by zero or their mean; a decoder's loss and the next-token
// predictions that change, an encoder's sentence-embedding cosine; or every head alone
// as a grid.  Token text goes in through textContent (shownToken).

import { errorText, isAbort, post } from "./api.js";
import { el } from "./dom.js";
import { STACK_CHOSEN, opener, stackFields, stackHint, stackShape, stackWords } from "./model-encdec.js";
import { heatGrid } from "./score-grid.js";

export const headName = (l, h) => `L${l} H${h}`;
// Whitespace made visible: a space-only token would be an empty cell.
export const shownToken = (text) => (text === "" ? "∅" : text.replace(/\n/g, "⏎").replace(/ /g, "␣"));

function build() {
  const parts = {
    mode: el("select", { id: "ablate-mode", "data-testid": "ablate-mode" }, [el("option", { value: "zero", text: "zero" }), el("option", { value: "mean", text: "mean over positions" })]),
    gridBox: el("div", { class: "ablate-grid-box" }),
    run: el("button", { type: "button", "data-testid": "ablate-run", text: "Ablate the chosen heads", disabled: true }),
    each: el("button", { type: "button", class: "secondary", "data-testid": "ablate-each", text: "Every head alone" }),
    clear: el("button", { type: "button", class: "secondary", "data-testid": "ablate-clear", text: "Clear" }),
    status: el("p", { class: "status", "data-testid": "ablate-status", "aria-live": "polite" }),
    error: el("p", { class: "error", role: "alert", "data-testid": "ablate-error" }),
    summary: el("p", { class: "ablate-summary", "data-testid": "ablate-summary" }),
    eachBox: el("div", { class: "ablate-each-box", "data-testid": "ablate-each-box" }),
    tableBox: el("div", { class: "ablate-table-box" }),
    stackHint: stackHint("ablate-stack-hint"),
  };
  parts.card = el("section", { class: "card ablate-card", "data-testid": "ablate-card", "aria-labelledby": "ablate-title" }, [
    el("h2", { id: "ablate-title", text: "Ablate heads" }),
    el("p", {
      class: "hint",
      "data-testid": "ablate-hint",
      text:
        "Click heads to choose them, then ablate: their outputs (context vectors) are replaced by zero, or by their mean over the text, just before the output projection. A decoder shows its loss and the next-token predictions that change; an encoder, how far its sentence embedding moves.",
    }),
    parts.stackHint.element,
    parts.gridBox,
    el("div", { class: "ablate-controls" }, [el("div", { class: "field" }, [el("label", { for: "ablate-mode", text: "Replace by" }), parts.mode]), parts.run, parts.each, parts.clear]),
    parts.status,
    parts.error,
    parts.summary,
    parts.eachBox,
    parts.tableBox,
  ]);
  return parts;
}

/** Each position's most likely next token before and after (changed rows marked). */
function predictionTable(answer) {
  const T = answer.tokens.length;
  const rows = answer.tokens.map((token, i) => {
    const before = answer.predictions_before[i];
    const after = answer.predictions_after[i];
    const changed = before.top_ids[0] !== after.top_ids[0];
    const delta = i + 1 < T ? answer.logprobs_after[i] - answer.logprobs_before[i] : null;
    return el("tr", { class: changed ? "changed" : null, "data-testid": "ablate-row", "data-changed": changed ? "1" : "0" }, [
      el("td", { class: "tok", text: shownToken(token) }),
      el("td", { class: "tok", text: i + 1 < T ? shownToken(answer.tokens[i + 1]) : "—" }),
      el("td", { class: "tok", text: `${shownToken(before.top_tokens[0])} ${before.top_probs[0].toFixed(2)}` }),
      el("td", { class: "tok", text: `${shownToken(after.top_tokens[0])} ${after.top_probs[0].toFixed(2)}` }),
      el("td", { class: "num", text: delta === null ? "—" : `${delta >= 0 ? "+" : ""}${delta.toFixed(3)}` }),
    ]);
  });
  return el("table", { class: "ablate-table", "data-testid": "ablate-table" }, [
    el("caption", { text: "Each position's most likely next token, before and after (changed rows marked)" }),
    el("thead", {}, [el("tr", {}, ["token", "actual next", "predicted before", "predicted after", "Δ log p(actual)"].map((t) => el("th", { scope: "col", text: t })))]),
    el("tbody", {}, rows),
  ]);
}

/** What an ablation answered: its summary (and a decoder's table), every head alone's grid. */
function showAnswer(parts, answer, openHead) {
  if (answer.heads.length) {
    const names = answer.heads.map(([l, h]) => headName(l, h)).join(", ");
    if (answer.loss_before != null) {
      // a decoder's, or an encoder-decoder's any stack (read in its decoder's log p of the target)
      const d = answer.loss_after - answer.loss_before;
      const changed = answer.predictions_before.filter((p, i) => p.top_ids[0] !== answer.predictions_after[i].top_ids[0]).length;
      parts.summary.textContent = `Without ${stackWords(answer)}${names} (${answer.mode}): loss ${answer.loss_before.toFixed(3)} → ${answer.loss_after.toFixed(3)} nats (${d >= 0 ? "+" : ""}${d.toFixed(3)}); ${changed} of ${answer.tokens.length} next-token predictions change.`;
      parts.tableBox.replaceChildren(predictionTable(answer));
    } else {
      parts.summary.textContent = `Without ${stackWords(answer)}${names} (${answer.mode}): the sentence embedding's cosine to the unablated one is ${answer.embedding_cosine.toFixed(5)}.`;
      parts.tableBox.replaceChildren();
    }
  }
  if (answer.each_head) {
    const delta = answer.each_head_measure === "delta_loss"; // signed: red the loss rose, blue it fell
    const what = delta ? "Δloss without the head (nats)" : "embedding cosine without the head";
    const colours = delta ? " Red: the loss rose without it, blue: it fell." : "";
    parts.eachBox.replaceChildren(
      el("p", { class: "hint", text: `Every head alone: ${what}.${colours} Click a head to open its map.` }),
      heatGrid({ values: answer.each_head, testid: "each-grid", label: what, click: openHead, digits: 3, signed: delta }),
    );
  }
}

function drawGrid(c) {
  const { parts, chosen } = c;
  const shape = stackShape(c.context);
  if (c.shape && (c.shape.stack !== shape.stack || c.shape.layers !== shape.layers || c.shape.heads !== shape.heads)) chosen.clear();
  c.shape = shape; // another stack's heads are other heads
  const zeros = Array.from({ length: shape.layers }, () => new Array(shape.heads).fill(0));
  for (const k of chosen) {
    const [l, h] = k.split("-").map(Number);
    zeros[l - 1][h - 1] = 1;
  }
  const toggle = (l, h) => {
    const k = `${l}-${h}`;
    if (chosen.has(k)) chosen.delete(k);
    else chosen.add(k);
    drawGrid(c);
    const again = parts.gridBox.querySelector(`[data-testid="ablate-grid-L${l}-H${h}"]`);
    if (again) again.focus();
  };
  const grid = heatGrid({ values: zeros, testid: "ablate-grid", label: "chosen", digits: 0, pressed: (l, h) => chosen.has(`${l}-${h}`), click: toggle });
  for (const cell of grid.querySelectorAll(".hg-cell")) cell.textContent = cell.getAttribute("aria-pressed") === "true" ? "✕" : "";
  parts.gridBox.replaceChildren(grid);
  parts.run.disabled = chosen.size === 0;
}

async function ablate(c, eachHead) {
  const { parts, live, context } = c;
  const mine = live.seq();
  parts.error.textContent = "";
  const heads = [...c.chosen].map((k) => k.split("-").map(Number));
  const body = { text: context.text, mode: parts.mode.value, each_head: eachHead, ...(heads.length ? { heads } : {}), ...(context.model ? { model: context.model } : {}) };
  parts.status.textContent = eachHead ? "Ablating every head, one at a time…" : "Ablating…";
  try {
    Object.assign(body, stackFields(context.pick, context.text));
    const started = performance.now();
    const answer = await post("/api/model/ablate", body, live.signal());
    if (mine !== live.seq()) return;
    parts.status.textContent = `done in ${Math.round(performance.now() - started)} ms`;
    showAnswer(parts, answer, opener(c.openHead, answer));
    parts.card.dataset.drawn = "1";
  } catch (err) {
    if (mine !== live.seq() || isAbort(err)) return;
    parts.status.textContent = "";
    parts.error.textContent = errorText(err);
  }
}

/** Mount the ablation card (live: {seq(), signal()}); {element, show(context)}; context = {model, text, layers, heads,
 * pick} (pick: an encoder-decoder's stack and target, model-encdec.js). */
export function mountAblation({ openHead, live }) {
  // chosen: "l-h" of heads to ablate, from 1
  const c = { parts: build(), chosen: new Set(), context: null, shape: null, openHead, live };
  const { parts } = c;
  parts.run.addEventListener("click", () => ablate(c, false));
  parts.each.addEventListener("click", () => ablate(c, true));
  parts.clear.addEventListener("click", () => {
    c.chosen.clear();
    drawGrid(c);
  });
  document.addEventListener(STACK_CHOSEN, () => {
    if (c.context && c.context.pick) drawGrid(c);
  });
  return {
    element: parts.card,
    /** New maps are shown: the answers go, the chosen heads stay for a model of the same shape. */
    show(next) {
      const old = c.context;
      const sameShape = old && old.layers === next.layers && old.heads === next.heads && old.model === next.model;
      c.context = next;
      if (!sameShape) c.chosen.clear();
      parts.card.dataset.drawn = "0";
      parts.summary.textContent = "";
      parts.tableBox.replaceChildren();
      parts.eachBox.replaceChildren();
      parts.stackHint.show(Boolean(next.pick));
      drawGrid(c);
    },
  };
}
