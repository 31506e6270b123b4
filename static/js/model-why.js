// "Why this cell" on /model: click a cell of the large map and its pre-softmax score is
// split over what wrote to the residual stream (POST /api/model/why): the largest
// (query component, key component) pairs ranked, named in words, and a component ×
// component grid of the strongest components, with the softmax weight beside the score.
//
// setupWhy({card, zoom, context, where}) fills `card` (hidden until a cell is asked) and listens
// for clicks on `zoom` (the map, `where` in words: the quick SVG map or Plotly's); context() gives
// {model, text, layer, head, tokens, causal, fields} of the map shown (head a number, else no
// cell is explained; fields(): more of the request, an encoder-decoder's stack and target),
// or null.  Returns {clear(), explain(ctx, row, col)} (explain: a cell of another map).  whyNodes(answer) draws an answer
// (the notebook's attention_viz.why too).  Token text goes in through textContent.

import { errorText, post } from "./api.js";
import { signedColour } from "./colour.js";
import { el } from "./dom.js";

const TOP = 12; // pairs listed
const GRID = 8; // components per side of the grid (the rest summed into "all others")
const shown = (text) => (text === "" ? "∅" : text.replace(/\n/g, "⏎").replace(/ /g, "␣"));
const fixed = (v) => `${v >= 0 ? "+" : "−"}${Math.abs(v).toFixed(3)}`;

/** A component's name in words, at the token it was written at. */
export function words(name, token) {
  const at = `'${shown(token)}'`;
  const side = name.startsWith("encoder ") ? "encoder " : ""; // cross-attention's key side
  const own = name.slice(side.length);
  if (own === "embedding") return `${side}embedding of ${at}`;
  if (own === "biases") return `${side}biases`;
  const head = /^L(\d+) (cross )?H(\d+)$/.exec(own);
  if (head) return `${side}layer ${head[1]} ${head[2] ? "cross-attention " : ""}head ${head[3]} at ${at}`;
  const mlp = /^L(\d+) MLP$/.exec(own);
  if (mlp) return `${side}layer ${mlp[1]} MLP at ${at}`;
  return `${name} at ${at}`;
}

/** The key side: its components (cross-attention's: the encoder output's) and the tokens of
 * its columns (cross-attention's: the source's). */
function keySide(answer) {
  const cross = answer.stack === "cross";
  return { keys: answer.key_components || answer.components, colTokens: cross ? answer.source_tokens : answer.tokens };
}

/** A part's cell colours: red for positive, blue for negative, by size against `scale`. */
function tint(v, scale) {
  const { background, color } = signedColour(v, scale);
  return `background:${background};color:${color}`;
}

/** Which cell a click on the large map names: {row, col}, or null. */
export function cellAt(ev, zoom, T) {
  const target = ev.target instanceof Element ? ev.target : null;
  if (!target || target.closest(".ytick, .xtick")) return null;
  const cells = target.closest(".quick-plot") && zoom.querySelector(".quick-cells");
  if (cells) {
    const box = cells.getBoundingClientRect();
    if (ev.clientX < box.left || ev.clientX > box.right || ev.clientY < box.top || ev.clientY >= box.bottom) return null;
    const row = Math.min(T - 1, Math.floor(((ev.clientY - box.top) / box.height) * T));
    const col = Math.min(T - 1, Math.floor(((ev.clientX - box.left) / box.width) * T));
    return { row, col };
  }
  const drag = target.closest(".nsewdrag");
  const layout = zoom._fullLayout;
  if (!drag || !layout || !layout.xaxis || !layout.yaxis) return null;
  const box = drag.getBoundingClientRect();
  const [x0, x1] = layout.xaxis.range;
  const [y0, y1] = layout.yaxis.range;
  const col = Math.round(x0 + ((ev.clientX - box.left) / box.width) * (x1 - x0));
  const row = Math.round(y1 + ((ev.clientY - box.top) / box.height) * (y0 - y1));
  if (row < 0 || col < 0 || row >= T || col >= T) return null;
  return { row, col };
}

function pairsTable(answer) {
  const { tokens, row, col } = answer;
  const { keys, colTokens } = keySide(answer);
  const top = Math.max(...answer.contributions.map((p) => Math.abs(p.value)), 1e-9);
  const rows = answer.contributions.slice(0, TOP).map((p, i) =>
    el("tr", { "data-testid": "why-pair" }, [
      el("td", { class: "num", text: String(i + 1) }),
      el("td", { text: words(p.query, tokens[row]) }),
      el("td", { text: words(p.key, colTokens[col]) }),
      el("td", { class: "num", style: tint(p.value, top), text: fixed(p.value) }),
    ]),
  );
  const listed = answer.contributions.slice(0, TOP).reduce((s, p) => s + p.value, 0);
  rows.push(
    el("tr", { class: "why-rest", "data-testid": "why-rest" }, [
      el("td", {}),
      el("td", { colspan: "2", text: `all other ${answer.components.length * keys.length - Math.min(TOP, answer.contributions.length)} pairs` }),
      el("td", { class: "num", text: fixed(answer.score - listed) }),
    ]),
  );
  return el("table", { class: "why-pairs", "data-testid": "why-pairs" }, [
    el("caption", { text: `The largest pairs: query side at '${shown(tokens[row])}' · key side at '${shown(colTokens[col])}'` }),
    el("thead", {}, [el("tr", {}, ["#", "query component", "key component", "share of the score"].map((t) => el("th", { scope: "col", text: t })))]),
    el("tbody", {}, rows),
  ]);
}

/** The strongest components of each side (by the sum of |value| over their row or column). */
function strongest(grid, byRow) {
  const N = byRow ? grid.length : grid[0].length;
  const weight = Array.from({ length: N }, (_, a) => grid.reduce((s, r, b) => s + Math.abs(byRow ? grid[a][b] : r[a]), 0));
  return [...weight.keys()].sort((a, b) => weight[b] - weight[a]).slice(0, GRID);
}

function componentGrid(answer) {
  const { grid, components, tokens, row, col } = answer;
  const { keys, colTokens } = keySide(answer);
  const qs = strongest(grid, true);
  const ks = strongest(grid, false);
  const more = components.length > GRID || keys.length > GRID;
  const value = (a, b) => grid[a][b];
  const others = (a, keys) => grid[a].reduce((s, v, b) => (keys.includes(b) ? s : s + v), 0);
  const top = Math.max(...qs.flatMap((a) => ks.map((b) => Math.abs(value(a, b)))), 1e-9);
  const cell = (v, label) =>
    el("td", { class: "num", style: tint(v, top), title: `${label}: ${fixed(v)}`, text: fixed(v).replace(/^([+−])0\./, "$1.") });
  const head = el("tr", {}, [
    el("th", { scope: "col", text: `query ╲ key` }),
    ...ks.map((b) => el("th", { scope: "col", text: words(keys[b], colTokens[col]) })),
    more ? el("th", { scope: "col", text: "all others" }) : null,
  ]);
  const body = qs.map((a) =>
    el("tr", { "data-testid": "why-grid-row" }, [
      el("th", { scope: "row", text: words(components[a], tokens[row]) }),
      ...ks.map((b) => cell(value(a, b), `${words(components[a], tokens[row])} · ${words(keys[b], colTokens[col])}`)),
      more ? cell(others(a, ks), `${words(components[a], tokens[row])} · all others`) : null,
    ]),
  );
  return el("div", { class: "why-grid-box" }, [
    el("table", { class: "why-grid", "data-testid": "why-grid" }, [
      el("caption", { text: more ? `The ${GRID} strongest components of each side (all ${components.length} in the answer's grid)` : "Every component pair" }),
      el("thead", {}, [head]),
      el("tbody", {}, body),
    ]),
  ]);
}

/** The card's heading, its one-line summary and its tables, for a /api/model/why answer. */
export function whyNodes(answer) {
  const { row, col } = answer;
  const { keys, colTokens } = keySide(answer);
  const count = keys === answer.components ? `${answer.components.length}²` : `${answer.components.length} × ${keys.length}`;
  const stack = answer.stack ? `the ${answer.stack} stack's ` : "";
  const bias = answer.score_bias == null ? "" : ` and the position bias ${fixed(answer.score_bias)} (a term of its own)`;
  return {
    title: `Why ${stack}layer ${answer.layer}, head ${answer.head} looks from '${shown(answer.tokens[row])}' (row ${row}) at '${shown(colTokens[col])}' (column ${col})`,
    summary: `Softmax weight ${answer.weight.toFixed(4)} · score ${answer.score.toFixed(3)} (q · k × ${answer.scale.toFixed(4)}), the sum of the ${count} pairs below${bias}: red raises the score, blue lowers it.${answer.softcap ? ` The layer soft-caps the score after that sum: the softmax reads ${answer.softcap} · tanh(score / ${answer.softcap}) = ${(answer.softcap * Math.tanh(answer.score / answer.softcap)).toFixed(3)}.` : ""}`,
    tables: [pairsTable(answer), componentGrid(answer)],
  };
}

/** The card's parts, built into `card`; where: what the reader clicks. */
function whyParts(card, where) {
  const parts = {
    title: el("h2", { id: "why-title", text: "Why this cell" }),
    hint: el("p", {
      class: "hint",
      text: `A head's score for a cell, q_row · k_col × scale, split over what wrote to the residual stream before its layer: the embedding, each earlier head's output, each earlier MLP, and the biases. Every norm is frozen at its value in the forward pass, so queries and keys are sums over these components and the score a sum over (query component, key component) pairs. Click a cell of ${where}.`,
    }),
    status: el("p", { class: "status", "data-testid": "why-status", "aria-live": "polite" }),
    error: el("p", { class: "error", role: "alert", "data-testid": "why-error" }),
    summary: el("p", { class: "why-summary", "data-testid": "why-summary" }),
    box: el("div", { class: "why-box", "data-testid": "why-box" }),
  };
  card.classList.add("card", "why-card");
  card.setAttribute("aria-labelledby", "why-title");
  card.replaceChildren(parts.title, parts.hint, parts.status, parts.error, parts.summary, parts.box);
  return parts;
}

/** Split one cell's score (POST /api/model/why) and show its pairs. */
async function explain(w, ctx, row, col) {
  const { card, parts } = w;
  const mine = ++w.seq;
  w.controller.abort();
  w.controller = new AbortController();
  card.hidden = false;
  card.dataset.drawn = "0";
  parts.error.textContent = "";
  parts.status.textContent = `Splitting layer ${ctx.layer}, head ${ctx.head}'s score for row ${row}, column ${col}…`;
  const body = { text: ctx.text, layer: ctx.layer, head: ctx.head, row, col, top: 40 };
  if (ctx.model) body.model = ctx.model;
  try {
    if (ctx.fields) Object.assign(body, ctx.fields()); // an encoder-decoder's stack and target
    const answer = await post("/api/model/why", body, w.controller.signal);
    if (mine !== w.seq) return;
    parts.status.textContent = "";
    const nodes = whyNodes(answer);
    parts.title.textContent = nodes.title;
    parts.summary.textContent = nodes.summary;
    parts.box.replaceChildren(...nodes.tables);
    card.dataset.drawn = "1";
    card.scrollIntoView({ block: "nearest" });
  } catch (err) {
    if (mine !== w.seq || (err && err.name === "AbortError")) return;
    parts.status.textContent = "";
    parts.error.textContent = errorText(err);
  }
}

/** A click on the map: its cell explained (a masked one said so). */
function onClick(w, ev, zoom, context) {
  const ctx = context();
  if (!ctx || !Number.isInteger(ctx.head)) return;
  const cell = cellAt(ev, zoom, ctx.tokens.length);
  if (!cell) return;
  if (ctx.causal && cell.col > cell.row) {
    w.card.hidden = false;
    w.parts.error.textContent = `Row ${cell.row} cannot see column ${cell.col}: a decoder's query attends to keys up to its own position (the cell is masked).`;
    return;
  }
  explain(w, ctx, cell.row, cell.col);
}

export function setupWhy({ card, zoom, context, where = "the large map" }) {
  const w = { card, parts: whyParts(card, where), controller: new AbortController(), seq: 0 };
  zoom.addEventListener("click", (ev) => onClick(w, ev, zoom, context));
  return {
    explain: (ctx, row, col) => explain(w, ctx, row, col),
    clear() {
      ++w.seq;
      w.controller.abort();
      card.hidden = true;
      w.parts.box.replaceChildren();
      w.parts.summary.textContent = "";
      w.parts.error.textContent = "";
    },
  };
}
