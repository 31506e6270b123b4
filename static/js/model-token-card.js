// /model's tokens and token view: the token list (one chosen, or several with
// shift/ctrl-click or "Select several": model-multi-token.js), and what the chosen
// token(s) read in every layer and head (model-token-view.js): from the maps held
// for a short text, asked for at full resolution per token for a long one
// (model-token-rows.js).  Mounted over the page (model-page.js); token text goes in
// through textContent.

import { errorText } from "./api.js";
import { tokenLabels } from "./labels.js";
import { plainModelError } from "./model-errors.js";
import { adds, chosenTokens, markTokens, mountTokenSelection, toggled } from "./model-multi-token.js";
import { drawTokenView, rowFor, rowsOfLayers } from "./model-token-view.js";
import { markChosenToken, renderGenerationSummary, renderTokenList } from "./model-tokens.js";

/** The token view's weights: the maps held (short texts: at once), or a promise of the
 * rows asked for (pooled maps). */
function tokenViewRows(page, shows) {
  const { state, view } = page;
  const { info, meta } = view;
  const chosen = chosenTokens(state);
  if (!view.overview || !view.rowSource || !chosen.length || chosen.some((t) => t >= meta.tokens.length)) return rowsOfLayers(view.layers);
  const rows = chosen.map((s) => rowFor({ s, generated: meta.generated || null, positions: meta.positions, when: state.when, causal: info.causal, count: meta.tokens.length }));
  if (rows.some((r) => r.query === null)) return rowsOfLayers(view.layers);
  const shown = Array.from({ length: info.layers }, (_, i) => i + 1).filter((l) => shows(l));
  const wanted = [...new Set([...shown, Math.min(state.tokenLayer ?? state.layer, info.layers)])].sort((a, b) => a - b);
  page.$("token-view").dataset.loading = "true";
  // Each chosen token's row, asked for at full resolution (kept per token by rowSource).
  return Promise.all(rows.map(({ query, keys }) => view.rowSource.get(query, keys, wanted, info.heads))).then((got) => (l, h, q, k) => {
    const at = rows.findIndex((r) => r.query === q && r.keys === k);
    const values = at < 0 ? null : got[at].get(l);
    return values ? Array.from(values.subarray(h * k, (h + 1) * k)) : null;
  });
}

/** What drawTokenView reads of the page. */
function viewInput({ state, view }, row) {
  const { info, meta } = view;
  return {
    labels: tokenLabels(meta.tokens),
    tokens: meta.tokens,
    generated: meta.generated || null,
    positions: meta.positions,
    causal: info.causal,
    row,
    L: info.layers,
    H: info.heads,
    chosen: state.token,
    queries: state.tokens.length > 1 ? state.tokens : null,
    combine: state.combine,
    layer: Math.min(state.tokenLayer ?? state.layer, info.layers),
    when: state.when,
  };
}

/** Draw the token view (after the rows arrive); a newer text or token wins. */
function drawTokens(page, t) {
  const { $, state, view } = page;
  const tokenView = $("token-view");
  if (!view.meta || !view.info || !view.info.layers) return Promise.resolve(); // no layers: nothing a token reads
  tokenView.hidden = false;
  const mine = view.seq;
  const token = state.token;
  const several = state.tokens.join(",");
  const stale = () => mine !== view.seq || token !== state.token || several !== state.tokens.join(",");
  const options = { onChoose: (i) => t.choose(i, { scroll: false }), onMode: (mode) => (t.headViewMode = mode), headViewMode: t.headViewMode };
  const draw = (row) => (stale() ? false : drawTokenView(tokenView, viewInput(page, row), options).then(() => true));
  const rows = tokenViewRows(page, t.shows);
  const done = typeof rows === "function" ? Promise.resolve(draw(rows)) : rows.then(draw);
  return done.then(
    (drawn) => {
      if (!drawn || mine !== view.seq) return;
      delete tokenView.dataset.loading;
      tokenView.dataset.token = state.token === null ? "" : String(state.token);
      tokenView.dataset.drawnTokens = state.tokens.length > 1 ? `${state.tokens.join(",")}:${state.combine}` : "";
    },
    (err) => {
      if (mine !== view.seq || token !== state.token) return;
      delete tokenView.dataset.loading;
      $("tv-what").textContent = `This token's weights could not be loaded: ${errorText(plainModelError(err))}`;
    },
  );
}

function renderTokens(page, t) {
  const { $, state } = page;
  const { meta } = page.view;
  renderTokenList($("wp-tokens"), meta, { chosen: state.token, onChoose: (i, ev) => t.choose(i, { ev }) });
  if (state.tokens.length > 1) markTokens($("wp-tokens"), state.tokens);
  t.selection.update({ selection: state.tokens, tokens: meta.tokens, combine: state.combine });
  const hidden = meta.all_tokens.length - meta.tokens.length;
  $("token-count").textContent = `(${meta.tokens.length} shown${hidden ? `, ${hidden} hidden` : ""})`;
  renderGenerationSummary($("gen-summary"), meta.generated_tokens ? meta : null);
}

/** Show what token i reads (a generated token: what the model read when it wrote it);
 * a shift/ctrl-click (or any click with "Select several" on) adds it to the chosen tokens,
 * or removes it. */
function chooseToken(page, t, i, { scroll = true, ev = null } = {}) {
  const { $, state } = page;
  const { meta } = page.view;
  if (!meta || !Number.isInteger(i) || i < 0 || i >= meta.tokens.length) return;
  state.tokens = adds(ev, t.selection.selecting()) ? toggled(state.tokens, state.token, i) : [];
  state.token = state.tokens.length === 1 ? state.tokens[0] : i;
  markChosenToken($("wp-tokens"), state.token);
  if (state.tokens.length > 1) markTokens($("wp-tokens"), state.tokens);
  t.selection.update({ selection: state.tokens, tokens: meta.tokens, combine: state.combine });
  page.writeUrl();
  t.draw();
  t.onChosen();
  const tokenView = $("token-view");
  if (scroll && tokenView.getBoundingClientRect().top > window.innerHeight - 80) tokenView.scrollIntoView({ block: "start", behavior: "instant" });
}

/** The token view's own controls: its layer, "when" (a generated token), several tokens. */
function bind(page, t) {
  const { $, state } = page;
  const redraw = (change) => (ev) => {
    change(ev);
    page.writeUrl();
    t.draw();
    t.onChosen(); // a written token's row is the one before it, or its own
  };
  const setTokens = (selection) => {
    state.tokens = selection;
    if (selection.length) state.token = selection[selection.length - 1];
    if (page.view.meta) t.render();
    page.writeUrl();
    t.draw();
    t.onChosen();
  };
  // Several tokens at once (model-multi-token.js): the chips, "Select several", sum or mean.
  t.selection = mountTokenSelection($("tv-select"), {
    onRemove: (i) => setTokens(state.tokens.filter((x) => x !== i)),
    onClear: () => setTokens([]),
    onCombine: (combine) => redraw(() => (state.combine = combine))(),
    onSelecting: () => {},
  });
  $("tv-layer").addEventListener("change", redraw((ev) => (state.tokenLayer = Number(ev.target.value))));
  $("token-view").addEventListener("change", (ev) => {
    if (ev.target.name === "tv-when") redraw(() => (state.when = ev.target.value))();
  });
}

/**
 * Mount the token list and view over the page; shows(l): whether the grid shows layer l;
 * onChosen(): the chosen tokens changed (the large map marks their rows).
 * Returns {render(), draw(), choose(i, {scroll, ev})}.
 */
export function mountTokens(page, { shows, onChosen = () => {} }) {
  const t = { headViewMode: "lines", selection: null, shows, onChosen };
  t.render = () => renderTokens(page, t);
  t.draw = () => drawTokens(page, t);
  t.choose = (i, options) => chooseToken(page, t, i, options);
  bind(page, t);
  return t;
}
