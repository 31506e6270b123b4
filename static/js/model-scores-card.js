// "Which heads do what" on /model: every head's type scores (POST
// /api/model/head-scores) as a layer × head grid and a ranked table, sortable and
// filterable by any score, each head opening its map.  The scores load by themselves
// once the card comes into view (IntersectionObserver), or at once after "Score every
// head" was pressed; a page never scored by its reader asks nothing.

import { errorText, isAbort, post } from "./api.js";
import { el, initialData } from "./dom.js";
import { heatGrid } from "./score-grid.js";

const headName = (l, h) => `L${l} H${h}`;
const words = (n) => n.replace(/_/g, " ");

function options(id, pairs) {
  return el("select", { id, "data-testid": id }, pairs.map(([value, text]) => el("option", { value, text })));
}

/** The card's elements (the sort names from the page's data, so "Sort by" reads before any scores arrive). */
function build() {
  const parts = {
    run: el("button", { type: "button", "data-testid": "scores-run", text: "Score every head" }),
    status: el("p", { class: "status", "data-testid": "scores-status", "aria-live": "polite" }),
    error: el("p", { class: "error", role: "alert", "data-testid": "scores-error" }),
    sort: options("score-sort", (initialData().score_names || []).map((n) => [n, words(n)])),
    order: options("score-order", [["desc", "strongest first"], ["asc", "weakest first"]]),
    count: options("score-count", [["10", "the top 10"], ["20", "the top 20"], ["all", "every head"]]),
    gridBox: el("div", { class: "score-grid-box" }),
    table: el("table", { class: "score-table", "data-testid": "score-table" }),
    induction: el("p", { class: "hint", "data-testid": "induction-note" }),
  };
  const field = (id, label, select) => el("div", { class: "field" }, [el("label", { for: id, text: label }), select]);
  parts.card = el("section", { class: "card heads-card", "data-testid": "heads-card", "aria-labelledby": "heads-title" }, [
    el("h2", { id: "heads-title", text: "Which heads do what" }),
    el("p", {
      class: "hint",
      text:
        "Each head's type scores (TransformerLens' head detector): the share of its attention on the previous token, on earlier copies of the same token, on the first token; how spread its rows are; and how it completes a repeated random block (induction). Sort by a score to open its strongest head; click any head to open its map.",
    }),
    el("div", { class: "heads-controls" }, [parts.run, field("score-sort", "Sort by", parts.sort), field("score-order", "Order", parts.order), field("score-count", "Show", parts.count)]),
    parts.status,
    parts.error,
    el("div", { class: "score-layout" }, [parts.gridBox, el("div", { class: "score-table-box" }, [parts.table])]),
    parts.induction,
  ]);
  return parts;
}

/** The ranked table's rows: [l, h] pairs of the heads kept, strongest (or weakest) first. */
function ranked(scores, sortBy, order) {
  const rows = [];
  for (let l = 1; l <= scores.layers; l++) for (let h = 1; h <= scores.heads; h++) rows.push([l, h]);
  const value = ([l, h]) => scores[sortBy][l - 1][h - 1];
  return rows.sort((a, b) => (order === "desc" ? value(b) - value(a) : value(a) - value(b)));
}

/** The table of heads by one score (each score a sortable column; a head opens its map). */
function scoreTable(table, scores, { sortBy, order, count, openHead, sortOn }) {
  const names = Object.keys(scores.labels);
  const rows = ranked(scores, sortBy, order);
  const kept = count === "all" ? rows : rows.slice(0, Number(count));
  const sortTh = (n) =>
    el("th", { scope: "col", class: n === sortBy ? "sorted" : null, "aria-sort": n === sortBy ? (order === "desc" ? "descending" : "ascending") : null }, [
      el("button", { type: "button", class: "link", "data-testid": `score-col-${n}`, text: words(n), onclick: () => sortOn(n, true) }),
    ]);
  const header = el("tr", {}, [el("th", { scope: "col", text: "#" }), el("th", { scope: "col", text: "head" }), ...names.map(sortTh)]);
  const body = kept.map(([l, h], i) =>
    el("tr", { "data-testid": "score-row", "data-layer": l, "data-head": h }, [
      el("td", { text: String(i + 1) }),
      el("th", { scope: "row" }, [el("button", { type: "button", class: "link", text: headName(l, h), onclick: () => openHead(l, h) })]),
      ...names.map((n) => el("td", { class: n === sortBy ? "sorted" : null, text: scores[n][l - 1][h - 1].toFixed(3) })),
    ]),
  );
  table.replaceChildren(el("caption", { text: `${kept.length} of ${rows.length} heads by ${words(sortBy)}` }), el("thead", {}, [header]), el("tbody", {}, body));
  return rows[0];
}

function draw(c) {
  if (!c.scores) return null;
  const { parts, view } = c;
  parts.sort.value = view.sortBy;
  parts.gridBox.replaceChildren(
    el("p", { class: "hint", "data-testid": "score-label", text: c.scores.labels[view.sortBy] }),
    heatGrid({ values: c.scores[view.sortBy], testid: "score-grid", label: words(view.sortBy), click: c.openHead }),
  );
  return scoreTable(parts.table, c.scores, { ...view, openHead: c.openHead, sortOn: (n, open) => sortOn(c, n, open) });
}

function sortOn(c, name, open) {
  c.view.sortBy = name;
  const top = draw(c);
  if (open && top) c.openHead(top[0], top[1]);
}

async function load(c, mine) {
  const { parts, live, context } = c;
  c.scoredSeq = mine;
  parts.status.textContent = "Scoring every head…";
  parts.error.textContent = "";
  const body = { text: context.text, seed: 0, ...(context.model ? { model: context.model } : {}) };
  try {
    const started = performance.now();
    const answer = await post("/api/model/head-scores", body, live.signal());
    if (mine !== live.seq()) return;
    c.scores = answer;
    draw(c);
    parts.card.dataset.drawn = "1";
    const stack = answer.stack ? ` of the ${answer.stack}'s self-attention` : "";
    parts.status.textContent = `${answer.layers} × ${answer.heads} heads${stack} scored in ${Math.round(performance.now() - started)} ms`;
    parts.induction.textContent = `Induction was measured on ${answer.induction_length} random tokens seen twice (seed 0, ${answer.induction_ids.length} tokens in all).`;
  } catch (err) {
    if (mine !== live.seq() || isAbort(err)) return;
    parts.status.textContent = "";
    parts.error.textContent = errorText(err);
  }
}

function bind(c, visible) {
  const { parts } = c;
  parts.sort.addEventListener("change", () => sortOn(c, parts.sort.value, true));
  parts.order.addEventListener("change", () => {
    c.view.order = parts.order.value;
    sortOn(c, c.view.sortBy, true);
  });
  parts.count.addEventListener("change", () => {
    c.view.count = parts.count.value;
    draw(c);
  });
  parts.run.addEventListener("click", () => {
    c.wanted = true;
    if (c.context) load(c, c.live.seq());
  });
  const inView = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && c.context && visible() && c.scoredSeq !== c.live.seq()) load(c, c.live.seq());
  });
  inView.observe(parts.card);
  return inView;
}

/**
 * Mount the scores card; live = {seq(), signal()} of the maps shown (model-heads.js),
 * visible() whether the cards are shown.  Returns {element, show(context)}; context =
 * {model, text}.
 */
export function mountScores({ openHead, live, visible }) {
  // wanted: once asked for, each new text is scored as its maps arrive; scoredSeq: the
  // maps whose scores were asked for.
  const c = { parts: build(), view: { sortBy: "previous_token", order: "desc", count: "10" }, openHead, live, context: null, scores: null, wanted: false, scoredSeq: -1 };
  const inView = bind(c, visible);
  const { parts } = c;
  return {
    element: parts.card,
    /** New maps are shown: score them now (asked for before) or once the card is in view. */
    show(next) {
      c.context = next;
      c.scores = null;
      parts.card.dataset.drawn = "0";
      parts.gridBox.replaceChildren();
      parts.table.replaceChildren();
      parts.induction.textContent = "";
      parts.status.textContent = "";
      if (c.wanted) load(c, live.seq());
      else {
        // A card already in view is not reported again: ask the observer afresh.
        inView.unobserve(parts.card);
        inView.observe(parts.card);
      }
    },
  };
}
