// Which heads matter, beside the maps on /model: every head's type scores
// (POST /api/model/head-scores) as a layer × head grid and a ranked table,
// sortable and filterable by any score, each head opening its map; ablation
// (POST /api/model/ablate) of heads chosen by clicking them, with the next-token
// predictions that change, or every head alone as a grid; and a decoder's logit
// lens (POST /api/model/logit-lens) as a layer × position table.
//
// setupHeadAnalysis({container, openHead}) builds the three cards in `container`
// and returns {show(context), clear()}; context = {model, text, causal, layers, heads,
// ablation} (model: null for the server's default; ablation: false hides ablation and the
// lens, for encoder-decoders, whose encoder's heads are scored).  Token text goes in through textContent.
// The scores load by themselves once the card comes into view (IntersectionObserver),
// so a page never scored by its reader asks nothing; requests still running when new
// maps are shown, or the page is left, are aborted.

import { ApiError, post } from "./api.js";
import { colourBar, setColourBar } from "./colour-bar.js";
import { el, initialData } from "./dom.js";
import { colour, heatGrid } from "./score-grid.js";

const messageOf = (err) => (err instanceof ApiError ? err.detail.map((d) => d.msg).join(" ") : String(err.message || err));
const headName = (l, h) => `L${l} H${h}`;
// Whitespace made visible: a space-only token would be an empty cell.
const shown = (text) => (text === "" ? "∅" : text.replace(/\n/g, "⏎").replace(/ /g, "␣"));

export function setupHeadAnalysis({ container, openHead }) {
  let context = null;
  let scores = null;
  let seq = 0;
  let sortBy = "previous_token";
  let order = "desc";
  let count = "10";
  const chosen = new Set(); // "l-h" of heads to ablate, from 1
  let controller = new AbortController(); // aborts the requests made for the maps shown
  let scoredSeq = -1; // the maps whose scores were asked for
  const renew = () => {
    controller.abort();
    controller = new AbortController();
  };
  const aborted = (err) => err && err.name === "AbortError";

  // ---------- cards ----------
  const scoresRun = el("button", { type: "button", "data-testid": "scores-run", text: "Score every head" });
  let wanted = false; // once asked for, each new text is scored as its maps arrive
  const scoresStatus = el("p", { class: "status", "data-testid": "scores-status", "aria-live": "polite" });
  const scoresError = el("p", { class: "error", role: "alert", "data-testid": "scores-error" });
  // The scores' names from the page's data, so "Sort by" reads before any scores arrive.
  const scoreNames = initialData().score_names || [];
  const sortSelect = el(
    "select",
    { id: "score-sort", "data-testid": "score-sort" },
    scoreNames.map((n) => el("option", { value: n, text: n.replace(/_/g, " ") })),
  );
  const orderSelect = el("select", { id: "score-order", "data-testid": "score-order" }, [
    el("option", { value: "desc", text: "strongest first" }),
    el("option", { value: "asc", text: "weakest first" }),
  ]);
  const countSelect = el("select", { id: "score-count", "data-testid": "score-count" }, [
    el("option", { value: "10", text: "the top 10" }),
    el("option", { value: "20", text: "the top 20" }),
    el("option", { value: "all", text: "every head" }),
  ]);
  const scoreGridBox = el("div", { class: "score-grid-box" });
  const scoreTable = el("table", { class: "score-table", "data-testid": "score-table" });
  const inductionNote = el("p", { class: "hint", "data-testid": "induction-note" });
  const scoresCard = el("section", { class: "card heads-card", "data-testid": "heads-card", "aria-labelledby": "heads-title" }, [
    el("h2", { id: "heads-title", text: "Which heads do what" }),
    el("p", {
      class: "hint",
      text:
        "Each head's type scores (TransformerLens' head detector): the share of its attention on the previous token, on earlier copies of the same token, on the first token; how spread its rows are; and how it completes a repeated random block (induction). Sort by a score to open its strongest head; click any head to open its map.",
    }),
    el("div", { class: "heads-controls" }, [
      scoresRun,
      el("div", { class: "field" }, [el("label", { for: "score-sort", text: "Sort by" }), sortSelect]),
      el("div", { class: "field" }, [el("label", { for: "score-order", text: "Order" }), orderSelect]),
      el("div", { class: "field" }, [el("label", { for: "score-count", text: "Show" }), countSelect]),
    ]),
    scoresStatus,
    scoresError,
    el("div", { class: "score-layout" }, [scoreGridBox, el("div", { class: "score-table-box" }, [scoreTable])]),
    inductionNote,
  ]);

  const modeSelect = el("select", { id: "ablate-mode", "data-testid": "ablate-mode" }, [
    el("option", { value: "zero", text: "zero" }),
    el("option", { value: "mean", text: "mean over positions" }),
  ]);
  const ablateGridBox = el("div", { class: "ablate-grid-box" });
  const ablateRun = el("button", { type: "button", "data-testid": "ablate-run", text: "Ablate the chosen heads", disabled: true });
  const ablateEach = el("button", { type: "button", class: "secondary", "data-testid": "ablate-each", text: "Every head alone" });
  const ablateClear = el("button", { type: "button", class: "secondary", "data-testid": "ablate-clear", text: "Clear" });
  const ablateStatus = el("p", { class: "status", "data-testid": "ablate-status", "aria-live": "polite" });
  const ablateError = el("p", { class: "error", role: "alert", "data-testid": "ablate-error" });
  const ablateSummary = el("p", { class: "ablate-summary", "data-testid": "ablate-summary" });
  const ablateEachBox = el("div", { class: "ablate-each-box", "data-testid": "ablate-each-box" });
  const ablateTableBox = el("div", { class: "ablate-table-box" });
  const ablateCard = el("section", { class: "card ablate-card", "data-testid": "ablate-card", "aria-labelledby": "ablate-title" }, [
    el("h2", { id: "ablate-title", text: "Ablate heads" }),
    el("p", {
      class: "hint",
      "data-testid": "ablate-hint",
      text:
        "Click heads to choose them, then ablate: their outputs (context vectors) are replaced by zero, or by their mean over the text, just before the output projection. A decoder shows its loss and the next-token predictions that change; an encoder, how far its sentence embedding moves.",
    }),
    ablateGridBox,
    el("div", { class: "ablate-controls" }, [
      el("div", { class: "field" }, [el("label", { for: "ablate-mode", text: "Replace by" }), modeSelect]),
      ablateRun,
      ablateEach,
      ablateClear,
    ]),
    ablateStatus,
    ablateError,
    ablateSummary,
    ablateEachBox,
    ablateTableBox,
  ]);

  const lensRun = el("button", { type: "button", "data-testid": "lens-run", text: "Show the logit lens" });
  const lensStatus = el("p", { class: "status", "data-testid": "lens-status", "aria-live": "polite" });
  const lensError = el("p", { class: "error", role: "alert", "data-testid": "lens-error" });
  const lensBox = el("div", { class: "lens-box", "data-testid": "lens-box" });
  const lensBar = colourBar("lens-colour-bar", { horizontal: true });
  const lensCard = el("section", { class: "card lens-card", "data-testid": "lens-card", "aria-labelledby": "lens-title" }, [
    el("h2", { id: "lens-title", text: "Logit lens: what each layer would predict" }),
    el("p", {
      class: "hint",
      text:
        "After each layer, the residual stream of every position through the final norm and the language-model head: its most likely next token (hover for the top five). The last row is the model's own prediction.",
    }),
    lensRun,
    lensStatus,
    lensError,
    lensBox,
  ]);
  container.replaceChildren(scoresCard, ablateCard, lensCard);

  // ---------- scores ----------
  function drawScores() {
    if (!scores) return;
    const names = Object.keys(scores.labels);
    if (!sortSelect.options.length) {
      sortSelect.replaceChildren(...names.map((n) => el("option", { value: n, text: n.replace(/_/g, " ") })));
    }
    sortSelect.value = sortBy;
    const grid = scores[sortBy];
    scoreGridBox.replaceChildren(
      el("p", { class: "hint", "data-testid": "score-label", text: scores.labels[sortBy] }),
      heatGrid({ values: grid, testid: "score-grid", label: sortBy.replace(/_/g, " "), click: openHead }),
    );
    const rows = [];
    for (let l = 1; l <= scores.layers; l++) for (let h = 1; h <= scores.heads; h++) rows.push([l, h]);
    const value = ([l, h]) => scores[sortBy][l - 1][h - 1];
    rows.sort((a, b) => (order === "desc" ? value(b) - value(a) : value(a) - value(b)));
    const kept = count === "all" ? rows : rows.slice(0, Number(count));
    const header = el("tr", {}, [
      el("th", { scope: "col", text: "#" }),
      el("th", { scope: "col", text: "head" }),
      ...names.map((n) =>
        el("th", { scope: "col", class: n === sortBy ? "sorted" : null, "aria-sort": n === sortBy ? (order === "desc" ? "descending" : "ascending") : null }, [
          el("button", { type: "button", class: "link", "data-testid": `score-col-${n}`, text: n.replace(/_/g, " "), onclick: () => sortOn(n, true) }),
        ]),
      ),
    ]);
    const body = kept.map(([l, h], i) =>
      el("tr", { "data-testid": "score-row", "data-layer": l, "data-head": h }, [
        el("td", { text: String(i + 1) }),
        el("th", { scope: "row" }, [el("button", { type: "button", class: "link", text: headName(l, h), onclick: () => openHead(l, h) })]),
        ...names.map((n) => el("td", { class: n === sortBy ? "sorted" : null, text: scores[n][l - 1][h - 1].toFixed(3) })),
      ]),
    );
    scoreTable.replaceChildren(
      el("caption", { text: `${kept.length} of ${rows.length} heads by ${sortBy.replace(/_/g, " ")}` }),
      el("thead", {}, [header]),
      el("tbody", {}, body),
    );
    return rows[0];
  }

  function sortOn(name, open) {
    sortBy = name;
    const top = drawScores();
    if (open && top) openHead(top[0], top[1]);
  }

  sortSelect.addEventListener("change", () => sortOn(sortSelect.value, true));
  orderSelect.addEventListener("change", () => {
    order = orderSelect.value;
    sortOn(sortBy, true);
  });
  countSelect.addEventListener("change", () => {
    count = countSelect.value;
    drawScores();
  });

  scoresRun.addEventListener("click", () => {
    wanted = true;
    if (context) loadScores(seq);
  });

  async function loadScores(mine) {
    scoredSeq = mine;
    scoresStatus.textContent = "Scoring every head…";
    scoresError.textContent = "";
    const body = { text: context.text, seed: 0 };
    if (context.model) body.model = context.model;
    try {
      const started = performance.now();
      const answer = await post("/api/model/head-scores", body, controller.signal);
      if (mine !== seq) return;
      scores = answer;
      drawScores();
      scoresCard.dataset.drawn = "1";
      const stack = answer.stack ? ` of the ${answer.stack}'s self-attention` : "";
      scoresStatus.textContent = `${answer.layers} × ${answer.heads} heads${stack} scored in ${Math.round(performance.now() - started)} ms`;
      inductionNote.textContent = `Induction was measured on ${answer.induction_length} random tokens seen twice (seed 0, ${answer.induction_ids.length} tokens in all).`;
    } catch (err) {
      if (mine !== seq || aborted(err)) return;
      scoresStatus.textContent = "";
      scoresError.textContent = messageOf(err);
    }
  }

  // ---------- ablation ----------
  function drawAblateGrid() {
    const { layers: L, heads: H } = context;
    const zeros = Array.from({ length: L }, () => new Array(H).fill(0));
    for (const k of chosen) {
      const [l, h] = k.split("-").map(Number);
      zeros[l - 1][h - 1] = 1;
    }
    const grid = heatGrid({
      values: zeros,
      testid: "ablate-grid",
      label: "chosen",
      digits: 0,
      pressed: (l, h) => chosen.has(`${l}-${h}`),
      click: (l, h) => {
        const k = `${l}-${h}`;
        if (chosen.has(k)) chosen.delete(k);
        else chosen.add(k);
        drawAblateGrid();
        const again = ablateGridBox.querySelector(`[data-testid="ablate-grid-L${l}-H${h}"]`);
        if (again) again.focus();
      },
    });
    for (const cell of grid.querySelectorAll(".hg-cell")) cell.textContent = cell.getAttribute("aria-pressed") === "true" ? "✕" : "";
    ablateGridBox.replaceChildren(grid);
    ablateRun.disabled = chosen.size === 0;
  }

  function predictionTable(answer) {
    const T = answer.tokens.length;
    const rows = [];
    for (let i = 0; i < T; i++) {
      const before = answer.predictions_before[i];
      const after = answer.predictions_after[i];
      const changed = before.top_ids[0] !== after.top_ids[0];
      const next = i + 1 < T ? answer.tokens[i + 1] : "";
      const delta = i + 1 < T ? answer.logprobs_after[i] - answer.logprobs_before[i] : null;
      rows.push(
        el("tr", { class: changed ? "changed" : null, "data-testid": "ablate-row", "data-changed": changed ? "1" : "0" }, [
          el("td", { class: "tok", text: shown(answer.tokens[i]) }),
          el("td", { class: "tok", text: i + 1 < T ? shown(next) : "—" }),
          el("td", { class: "tok", text: `${shown(before.top_tokens[0])} ${before.top_probs[0].toFixed(2)}` }),
          el("td", { class: "tok", text: `${shown(after.top_tokens[0])} ${after.top_probs[0].toFixed(2)}` }),
          el("td", { class: "num", text: delta === null ? "—" : `${delta >= 0 ? "+" : ""}${delta.toFixed(3)}` }),
        ]),
      );
    }
    return el("table", { class: "ablate-table", "data-testid": "ablate-table" }, [
      el("caption", { text: "Each position's most likely next token, before and after (changed rows marked)" }),
      el("thead", {}, [
        el("tr", {}, ["token", "actual next", "predicted before", "predicted after", "Δ log p(actual)"].map((t) => el("th", { scope: "col", text: t }))),
      ]),
      el("tbody", {}, rows),
    ]);
  }

  async function ablate(eachHead) {
    const mine = seq;
    ablateError.textContent = "";
    const heads = [...chosen].map((k) => k.split("-").map(Number));
    const body = { text: context.text, mode: modeSelect.value, each_head: eachHead };
    if (heads.length) body.heads = heads;
    if (context.model) body.model = context.model;
    ablateStatus.textContent = eachHead ? "Ablating every head, one at a time…" : "Ablating…";
    try {
      const started = performance.now();
      const answer = await post("/api/model/ablate", body, controller.signal);
      if (mine !== seq) return;
      ablateStatus.textContent = `done in ${Math.round(performance.now() - started)} ms`;
      if (answer.heads.length) {
        const names = answer.heads.map(([l, h]) => headName(l, h)).join(", ");
        if (answer.causal) {
          const d = answer.loss_after - answer.loss_before;
          const changed = answer.predictions_before.filter((p, i) => p.top_ids[0] !== answer.predictions_after[i].top_ids[0]).length;
          ablateSummary.textContent = `Without ${names} (${answer.mode}): loss ${answer.loss_before.toFixed(3)} → ${answer.loss_after.toFixed(3)} nats (${d >= 0 ? "+" : ""}${d.toFixed(3)}); ${changed} of ${answer.tokens.length} next-token predictions change.`;
          ablateTableBox.replaceChildren(predictionTable(answer));
        } else {
          ablateSummary.textContent = `Without ${names} (${answer.mode}): the sentence embedding's cosine to the unablated one is ${answer.embedding_cosine.toFixed(5)}.`;
          ablateTableBox.replaceChildren();
        }
      }
      if (answer.each_head) {
        const what = answer.each_head_measure === "delta_loss" ? "Δloss without the head (nats)" : "embedding cosine without the head";
        ablateEachBox.replaceChildren(
          el("p", { class: "hint", text: `Every head alone: ${what}. Click a head to open its map.` }),
          heatGrid({ values: answer.each_head, testid: "each-grid", label: what, click: openHead, digits: 3 }),
        );
      }
      ablateCard.dataset.drawn = "1";
    } catch (err) {
      if (mine !== seq || aborted(err)) return;
      ablateStatus.textContent = "";
      ablateError.textContent = messageOf(err);
    }
  }

  ablateRun.addEventListener("click", () => ablate(false));
  ablateEach.addEventListener("click", () => ablate(true));
  ablateClear.addEventListener("click", () => {
    chosen.clear();
    drawAblateGrid();
  });

  // ---------- logit lens ----------
  async function lens() {
    const mine = seq;
    lensError.textContent = "";
    lensStatus.textContent = "Reading every layer…";
    const body = { text: context.text };
    if (context.model) body.model = context.model;
    try {
      const answer = await post("/api/model/logit-lens", body, controller.signal);
      if (mine !== seq) return;
      lensStatus.textContent = "";
      const head = el("tr", {}, [el("th", { scope: "col", text: "layer" }), ...answer.tokens.map((t) => el("th", { scope: "col", class: "tok", text: shown(t) }))]);
      const rows = answer.top_tokens.map((layer, l) =>
        el("tr", { "data-testid": "lens-row" }, [
          el("th", { scope: "row", text: l + 1 === answer.layers ? `${l + 1} (output)` : String(l + 1) }),
          ...layer.map((tops, i) => {
            const p = answer.top_probs[l][i];
            const c = colour(p[0]);
            return el("td", {
              class: "tok",
              style: `background:${c.background};color:${c.color}`,
              title: tops.map((t, k) => `${shown(t)} ${p[k].toFixed(3)}`).join("\n"),
              text: shown(tops[0]),
            });
          }),
        ]),
      );
      lensBox.replaceChildren(
        el("table", { class: "lens-table", "data-testid": "lens-table" }, [
          el("caption", { text: "Top next token after each layer (colour: its probability)" }),
          el("thead", {}, [head]),
          el("tbody", {}, rows),
        ]),
        lensBar,
      );
      setColourBar(lensBar, { zmax: 1, label: "probability of the top token" });
    } catch (err) {
      if (mine !== seq || aborted(err)) return;
      lensStatus.textContent = "";
      lensError.textContent = messageOf(err);
    }
  }
  lensRun.addEventListener("click", lens);

  // ---------- loading by itself ----------
  const inView = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && context && !container.hidden && scoredSeq !== seq) loadScores(seq);
  });
  inView.observe(scoresCard);
  window.addEventListener("pagehide", renew);

  return {
    /** New maps are shown: score them, reset the ablation. */
    show(next) {
      const mine = ++seq;
      renew();
      const sameShape = context && context.layers === next.layers && context.heads === next.heads && context.model === next.model;
      context = next;
      if (!sameShape) chosen.clear();
      scores = null;
      scoresCard.dataset.drawn = "0";
      ablateCard.dataset.drawn = "0";
      ablateSummary.textContent = "";
      ablateTableBox.replaceChildren();
      ablateEachBox.replaceChildren();
      lensBox.replaceChildren();
      ablateCard.hidden = next.ablation === false; // encoder-decoders: the scores only
      lensCard.hidden = !next.causal || next.ablation === false;
      container.hidden = false;
      drawAblateGrid();
      scoreGridBox.replaceChildren();
      scoreTable.replaceChildren();
      inductionNote.textContent = "";
      scoresStatus.textContent = "";
      if (wanted) loadScores(mine);
      else {
        // A card already in view is not reported again: ask the observer afresh.
        inView.unobserve(scoresCard);
        inView.observe(scoresCard);
      }
    },
    clear() {
      ++seq;
      renew();
      container.hidden = true;
    },
  };
}
