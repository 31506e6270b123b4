// The ablation grid's fast mode on /model: every head's ablation effect estimated in one
// pass (POST /api/model/attribute: attribution patching or AtP*), the heads of the largest
// estimates confirmed by ablating each alone, and on request the exact grid beside the
// estimate, with a sentence saying which numbers are estimates and where the two disagree.
//
// setupAttribution({card, openHead}) fills `card` and returns {show(context), clear()};
// context = {model, text, causal, layers, heads, tokens, pick} (decoders, and encoder-decoders
// with pick, model-encdec.js: an encoder's card stays hidden).  Token text goes in through textContent.

import { errorText, post } from "./api.js";
import { el } from "./dom.js";
import { opener, stackFields, stackHint } from "./model-encdec.js";
import { heatGrid } from "./score-grid.js";

const CONFIRM = 3;
const shown = (text) => (text === "" ? "∅" : text.replace(/\n/g, "⏎").replace(/ /g, "␣"));
const headName = (l, h) => `L${l} H${h}`;
const signed = (v) => `${v >= 0 ? "+" : "−"}${Math.abs(v).toFixed(2)}`;
const METHOD_NAMES = { attribution_patching: "attribution patching", atp_star: "AtP*" };
const CANCEL = "⇄";

/** (layer, head) from 1 of the grid's largest value. */
function first(grid) {
  let best = [1, 1];
  grid.forEach((row, l) => row.forEach((v, h) => (v > grid[best[0] - 1][best[1] - 1] ? (best = [l + 1, h + 1]) : null)));
  return best;
}

/** Where the estimate and the exact effect disagree, in words. */
export function disagreement(estimate, exact, method) {
  const name = METHOD_NAMES[method] || method;
  const [el1, eh1] = first(estimate);
  const [xl1, xh1] = first(exact);
  const parts = [];
  if (el1 === xl1 && eh1 === xh1) parts.push(`The ${name} estimate and exact ablation both rank ${headName(el1, eh1)} first.`);
  else
    parts.push(
      `The ${name} estimate ranks ${headName(el1, eh1)} first (≈ ${signed(estimate[el1 - 1][eh1 - 1])}, exactly ${signed(exact[el1 - 1][eh1 - 1])}); exact ablation ranks ${headName(xl1, xh1)} first (${signed(exact[xl1 - 1][xh1 - 1])}, estimated ${signed(estimate[xl1 - 1][xh1 - 1])}).`,
    );
  const gaps = [];
  exact.forEach((row, l) => row.forEach((v, h) => gaps.push([Math.abs(v - estimate[l][h]), l + 1, h + 1])));
  gaps.sort((a, b) => b[0] - a[0]);
  const far = gaps.filter(([gap]) => gap > 0.1).slice(0, 3);
  if (far.length)
    parts.push(
      `They differ most at ${far.map(([, l, h]) => `${headName(l, h)} (≈ ${signed(estimate[l - 1][h - 1])} vs ${signed(exact[l - 1][h - 1])})`).join(", ")}: there removing the head moves later layers (a softmax, an MLP) too far for a first-order estimate.`,
    );
  return parts.join(" ");
}

/** Mark the cancelled heads' cells ⇄ in every grid of `grids`, in their words too. */
function markCancelled(cancelled, grids) {
  for (const { layer, head } of cancelled)
    for (const grid of grids) {
      const cell = grid.querySelector(`[data-testid$="-L${layer}-H${head}"]`);
      cell.classList.add("attr-cancelled");
      cell.dataset.cancelled = "1";
      const words = `${cell.getAttribute("aria-label")}; ${CANCEL} paths cancel: its estimate may hide an effect`;
      cell.setAttribute("aria-label", words);
      cell.title = words;
    }
}

/** The heads whose estimate may be cancelled: each with its estimate and GradDrop score. */
function cancelledTable(answer, openHead) {
  const rows = answer.cancelled.map(({ layer, head }) =>
    el("tr", { "data-testid": "attr-cancelled-row" }, [
      el("th", { scope: "row" }, [el("button", { type: "button", class: "link", text: `${CANCEL} ${headName(layer, head)}`, onclick: () => openHead(layer, head) })]),
      el("td", { class: "num", text: `≈ ${signed(answer.estimate[layer - 1][head - 1])}` }),
      el("td", { class: "num", text: answer.graddrop[layer - 1][head - 1].toFixed(2) }),
    ]),
  );
  return el("figure", { class: "attr-grid", "data-testid": "attr-cancelled" }, [
    el("table", { class: "attr-table" }, [
      el("caption", { text: `${CANCEL} Estimates that may be cancelled` }),
      el("thead", {}, [el("tr", {}, ["head", "estimate", "GradDrop"].map((t) => el("th", { scope: "col", text: t })))]),
      el("tbody", {}, rows),
    ]),
    el("p", {
      class: "attr-cancel-why",
      text: "Such a head changes the loss through several later layers in opposite directions, and in the estimate those effects cancel out: a small estimate does not mean that it does not matter. Ablate it to see.",
    }),
  ]);
}

/** AtP*'s GradDrop (Kramár et al. 2024): its score grid, the heads whose estimate may be a
 * cancellation marked ⇄ in both grids and listed with both numbers, and a sentence. */
function cancellation(answer, estimateGrid, openHead) {
  if (!answer.graddrop) return { figures: [], note: "" };
  const scoreGrid = heatGrid({ values: answer.graddrop, testid: "attr-graddrop", label: "GradDrop score", click: openHead });
  markCancelled(answer.cancelled, [estimateGrid, scoreGrid]);
  const figures = [
    el("figure", { class: "attr-grid" }, [
      el("figcaption", { text: "GradDrop score (AtP*'s ranking, unsigned)" }),
      scoreGrid,
    ]),
  ];
  const count = answer.cancelled.length;
  if (count) figures.push(cancelledTable(answer, openHead));
  const how =
    "AtP* also re-estimates every head with the path through one later layer cut, one layer at a time (GradDrop), and ranks heads by the average size of those estimates.";
  const found = count
    ? ` ${CANCEL} marks ${count === 1 ? "a head" : `${count} heads`} whose GradDrop score is over twice the size of ${count === 1 ? "its estimate" : "their estimates"}.`
    : " No head's GradDrop score is over twice its estimate: no estimate looks cancelled.";
  return { figures, note: `${how}${found}` };
}

function targetText(answer) {
  if (answer.stack) return `the mean −log p of the target's tokens ('${shown(answer.target_text)}') given the source`;
  if (!answer.target) return "the next-token loss over the text";
  return `−log p('${shown(answer.target_text)}') after '${shown(answer.tokens[answer.target.position])}' (position ${answer.target.position})`;
}

/** The confirmed heads' table: each head's estimate and its exact Δloss ("" when none). */
function confirmedTable(answer, openHead) {
  const rows = answer.confirmed.map((c) =>
    el("tr", { "data-testid": "attr-confirmed-row" }, [
      el("th", { scope: "row" }, [el("button", { type: "button", class: "link", text: headName(c.layer, c.head), onclick: () => openHead(c.layer, c.head) })]),
      el("td", { class: "num", text: `≈ ${signed(c.estimate)}` }),
      el("td", { class: "num", text: signed(c.exact) }),
    ]),
  );
  return rows.length
    ? el("table", { class: "attr-table", "data-testid": "attr-table" }, [
        el("caption", {
          text: answer.graddrop
            ? `The ${rows.length} largest GradDrop scores, confirmed by ablating each head alone`
            : `The ${rows.length} largest estimates, confirmed by ablating each head alone`,
        }),
        el("thead", {}, [el("tr", {}, ["head", "estimated Δloss", "exact Δloss"].map((t) => el("th", { scope: "col", text: t })))]),
        el("tbody", {}, rows),
      ])
    : "";
}

/** Whether the exact Δloss bears the estimates out: the grids' disagreement, or the confirmed heads'. */
function confirmNote(answer) {
  const wrong = answer.confirmed.filter((c) => Math.abs(c.exact - c.estimate) > Math.max(0.1, 0.5 * Math.abs(c.exact)));
  return answer.exact
    ? disagreement(answer.estimate, answer.exact, answer.method === "exact" ? "attribution_patching" : answer.method)
    : wrong.length
      ? `The estimate is off at ${wrong.map((c) => `${headName(c.layer, c.head)} (≈ ${signed(c.estimate)}, exactly ${signed(c.exact)})`).join(", ")}.`
      : answer.confirmed.length
        ? "The confirmed heads' exact effects agree with their estimates; heads outside the table are estimates only (ask for the exact grid to check them all)."
        : "";
}

/** The grids, the confirmed heads' table and the sentence for a /api/model/attribute answer
 * (the notebook's attention_viz.attribute too); with "exact", the estimate is attribution patching's. */
export function attributionNodes(answer, openHead) {
  const name = METHOD_NAMES[answer.method === "exact" ? "attribution_patching" : answer.method];
  const estimateGrid = heatGrid({ values: answer.estimate, testid: "attr-estimate", label: "estimated Δloss", click: openHead, signed: true });
  const cancelled = cancellation(answer, estimateGrid, openHead);
  const grids = [
    el("figure", { class: "attr-grid" }, [el("figcaption", { text: `≈ estimated Δloss (${name})` }), estimateGrid]),
    ...cancelled.figures,
  ];
  if (answer.exact)
    grids.push(
      el("figure", { class: "attr-grid" }, [
        el("figcaption", { text: "exact Δloss (each head ablated alone)" }),
        heatGrid({ values: answer.exact, testid: "attr-exact-grid", label: "exact Δloss", click: openHead, signed: true }),
      ]),
    );
  const table = confirmedTable(answer, openHead);
  const loss0 = `Loss: ${targetText(answer)} = ${answer.loss.toFixed(3)} nats.${answer.stack ? ` The grids are the ${answer.stack} stack's heads.` : ""}`;
  const estimates = `Numbers marked ≈ are ${name} estimates; the exact Δloss comes from ablating the head alone${answer.exact ? " (every head, right grid)" : ` (the ${answer.confirmed.length} heads in the table)`}.`;
  const colours = "In the Δloss grids red is a head whose removal raises the loss, blue one whose removal lowers it.";
  const note = [loss0, estimates, colours, cancelled.note, confirmNote(answer)].filter(Boolean).join(" ");
  return { grids, table, note };
}

/** The three menus: the estimate's method, what replaces a head, and the loss. */
function choices() {
  const method = el("select", { id: "attr-method", "data-testid": "attr-method" }, [
    el("option", { value: "attribution_patching", text: "attribution patching (gradient × change)" }),
    el("option", { value: "atp_star", text: "AtP* (later softmaxes recomputed)" }),
  ]);
  const mode = el("select", { id: "attr-mode", "data-testid": "attr-mode" }, [
    el("option", { value: "zero", text: "zero" }),
    el("option", { value: "mean", text: "mean over positions" }),
  ]);
  const loss = el("select", { id: "attr-loss", "data-testid": "attr-loss" }, [
    el("option", { value: "last", text: "its own next token at the end" }),
    el("option", { value: "text", text: "next-token loss over the text" }),
  ]);
  return { method, mode, loss };
}

/** The card's controls and boxes, built into `card`. */
function build(card) {
  const { method, mode, loss } = choices();
  const run = el("button", { type: "button", "data-testid": "attr-run", text: "Estimate every head" });
  const exact = el("button", { type: "button", class: "secondary", "data-testid": "attr-exact", text: "Exact for every head" });
  const status = el("p", { class: "status", "data-testid": "attr-status", "aria-live": "polite" });
  const error = el("p", { class: "error", role: "alert", "data-testid": "attr-error" });
  const note = el("p", { class: "attr-note", "data-testid": "attr-note" });
  const grids = el("div", { class: "attr-grids", "data-testid": "attr-grids" });
  const confirmed = el("div", { class: "attr-confirmed", "data-testid": "attr-confirmed" });
  const hint = stackHint("attr-stack-hint");
  const lossField = el("div", { class: "field" }, [el("label", { for: "attr-loss", text: "Loss" }), loss]);
  card.classList.add("card", "attr-card");
  card.setAttribute("aria-labelledby", "attr-title");
  card.replaceChildren(
    el("h2", { id: "attr-title", text: "Which heads matter, in one pass" }),
    el("p", {
      class: "hint",
      text:
        "Every head's ablation effect (Δloss: the loss with the head's output replaced, minus the loss with all heads) estimated from one forward and one backward pass, instead of one pass per head. The heads with the largest estimates are then ablated exactly, each alone. Click a head to open its map.",
    }),
    hint.element,
    el("div", { class: "attr-controls" }, [
      el("div", { class: "field" }, [el("label", { for: "attr-method", text: "Estimate" }), method]),
      el("div", { class: "field" }, [el("label", { for: "attr-mode", text: "Replace by" }), mode]),
      lossField,
      run,
      exact,
    ]),
    status,
    error,
    note,
    grids,
    confirmed,
  );

  return { method, mode, loss, lossField, hint, run, exact, status, error, note, grids, confirmed };
}

function draw(a, answer) {
  const nodes = attributionNodes(answer, opener(a.openHead, answer));
  a.parts.grids.replaceChildren(...nodes.grids);
  a.parts.confirmed.replaceChildren(nodes.table);
  a.parts.note.textContent = nodes.note;
  a.card.dataset.drawn = "1";
}

/** Estimate every head (or, all: ablate every head exactly). */
async function estimate(a, all) {
  const { parts, context } = a;
  const mine = ++a.seq;
  a.controller.abort();
  a.controller = new AbortController();
  parts.error.textContent = "";
  parts.status.textContent = all ? "Ablating every head alone, and estimating…" : "Estimating every head from one forward and one backward pass…";
  const body = { text: context.text, method: all ? "exact" : parts.method.value, ablation: parts.mode.value, confirm_top: all ? 0 : CONFIRM };
  if (parts.loss.value === "last" && !context.pick) body.target = { position: context.tokens.length - 1 };
  if (context.model) body.model = context.model;
  try {
    Object.assign(body, stackFields(context.pick, context.text)); // an encoder-decoder's stack and target
    const started = performance.now();
    const answer = await post("/api/model/attribute", body, a.controller.signal);
    if (mine !== a.seq) return;
    parts.status.textContent = `done in ${Math.round(performance.now() - started)} ms`;
    draw(a, answer);
  } catch (err) {
    if (mine !== a.seq || (err && err.name === "AbortError")) return;
    parts.status.textContent = "";
    parts.error.textContent = errorText(err);
  }
}

/** An encoder-decoder's loss is its target's (no menu); AtP* is a decoder-only estimate. */
function encoderDecoder(parts, on) {
  parts.hint.show(on);
  parts.lossField.hidden = on;
  parts.lossField.style.display = on ? "none" : ""; // .field sets its own display
  const star = parts.method.querySelector("option[value='atp_star']");
  star.disabled = on;
  if (on && parts.method.value === "atp_star") parts.method.value = "attribution_patching";
}

export function setupAttribution({ card, openHead }) {
  const a = { card, openHead, parts: build(card), context: null, seq: 0, controller: new AbortController() };
  const { parts } = a;
  parts.run.addEventListener("click", () => estimate(a, false));
  parts.exact.addEventListener("click", () => estimate(a, true));

  return {
    show(next) {
      ++a.seq;
      a.controller.abort();
      a.context = next;
      card.hidden = !next.causal && !next.pick;
      encoderDecoder(parts, Boolean(next.pick));
      card.dataset.drawn = "0";
      parts.grids.replaceChildren();
      parts.confirmed.replaceChildren();
      parts.note.textContent = "";
      parts.status.textContent = "";
      parts.error.textContent = "";
    },
    clear() {
      ++a.seq;
      a.controller.abort();
      card.hidden = true;
    },
  };
}
