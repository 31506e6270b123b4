// The notebook's token list and token view (model_view, show): what the chosen token
// reads in every head, as on /model, from the maps the view holds; several tokens at
// once (shift- or ctrl-click, or "Select several"), their rows summed or averaged
// (model-multi-token.js), as on /model.

import { el } from "./dom.js";
import { tokenLabels } from "./labels.js";
import { adds, markTokens, mountTokenSelection, toggled } from "./model-multi-token.js";
import { drawTokenView, rowsOfLayers } from "./model-token-view.js";
import { renderTokenList } from "./model-tokens.js";

const card = (title, ...children) => el("section", { class: "card" }, [el("h2", { text: title }), ...children]);

/** The token view's card, empty (drawTokenView fills it). */
function tokenViewCard() {
  return el("section", { class: "card token-view", "data-testid": "token-view" }, [
    el("h2", { text: "From a token to what it reads" }),
    el("p", { class: "tv-what", "data-testid": "tv-what" }),
    el("div", { class: "tv-select", "data-testid": "tv-select" }),
    el("div", { class: "tv-controls", "data-testid": "tv-controls", hidden: true }, [
      el("div", { class: "field" }, [el("label", { for: "tv-layer", text: "Layer" }), el("select", { id: "tv-layer", "data-testid": "tv-layer" })]),
      el("fieldset", { class: "tv-when", "data-testid": "tv-when", hidden: true }, [el("legend", { text: "This generated token" })]),
    ]),
    el("div", { class: "tv-body", "data-testid": "tv-body", hidden: true }, [
      el("h3", { "data-testid": "tv-layer-title" }),
      el("div", { id: "tv-headview", "data-testid": "headview" }),
      el("h3", { text: "Every layer × every head" }),
      el("div", { class: "plot tv-strip", "data-testid": "tv-strip" }),
      el("div", { class: "tv-strip-canvas", "data-testid": "tv-strip-canvas", hidden: true }),
    ]),
  ]);
}

/** Layer n (from 1) -> {heads: (H, T, T)} of a decoded (L, H, T, T) tensor (views, not copies). */
function layersOf(maps, L, H) {
  const layers = new Map();
  const [T] = maps.shape.slice(-1);
  for (let l = 0; l < L; l++) layers.set(l + 1, { heads: { shape: [H, T, T], values: maps.values.subarray(l * H * T * T, (l + 1) * H * T * T) } });
  return layers;
}

/** The token listing's fields of a square section, as /model's token listing has them. */
function sectionMeta(section) {
  const tokens = section.queries;
  return {
    tokens,
    positions: tokens.map((_, i) => i),
    special: section.special || tokens.map(() => false),
    token_type_ids: section.token_type_ids || tokens.map(() => 0),
    generated: null,
  };
}

/** What drawTokenView needs of the section whatever the tokens chosen. */
function baseView(section, meta, maps, H) {
  const L = section.layers.length;
  const row = rowsOfLayers(layersOf(maps, L, H));
  return { labels: tokenLabels(meta.tokens), tokens: meta.tokens, generated: null, positions: meta.positions, causal: section.causal, row, L, H, when: "input" };
}

/** The token list and the token view drawn for the chosen token(s) in s. */
function drawChosen(parts, s, selection, choose) {
  const { list, tv, meta, base } = parts;
  const several = s.several.length > 1;
  renderTokenList(list, meta, { chosen: s.chosen, onChoose: choose });
  if (several) markTokens(list, s.several);
  selection.update({ selection: s.several, tokens: meta.tokens, combine: s.combine });
  const view = { ...base, chosen: s.chosen, queries: several ? s.several : null, combine: s.combine, layer: s.layer };
  drawTokenView(tv, view, { onChoose: (i) => choose(i), onMode: (m) => (s.mode = m), headViewMode: s.mode }).then(() => {
    tv.dataset.token = String(s.chosen);
    tv.dataset.drawnTokens = s.several.length > 1 ? `${s.several.join(",")}:${s.combine}` : "";
  });
}

/** The several tokens' chips, clear and sum/mean, and the layer menu: each changes s and redraws. */
function mountControls(tv, s, draw) {
  const setSeveral = (next) => {
    s.several = next;
    if (next.length) s.chosen = next[next.length - 1];
    draw();
  };
  tv.querySelector("[data-testid='tv-layer']").addEventListener("change", (ev) => {
    s.layer = Number(ev.target.value);
    draw();
  });
  return mountTokenSelection(tv.querySelector("[data-testid='tv-select']"), {
    onRemove: (i) => setSeveral(s.several.filter((x) => x !== i)),
    onClear: () => setSeveral([]),
    onCombine: (combine) => {
      s.combine = combine;
      draw();
    },
    onSelecting: () => {},
  });
}

/** Chooses tokens in the list and the view and draws them; the last token first (in a decoder, the one that reads every other). */
function wireTokenView(parts) {
  const s = { chosen: parts.meta.tokens.length - 1, several: [], combine: "mean", layer: 1, mode: "lines" };
  let selection = null;
  const draw = () => drawChosen(parts, s, selection, choose);
  /** Token i shown alone, or (shift/ctrl-click, "Select several") added to or removed from the chosen ones. */
  function choose(i, ev = null) {
    s.several = adds(ev, selection.selecting()) ? toggled(s.several, s.chosen, i) : [];
    if (s.several.length) s.chosen = s.several.includes(i) ? i : s.several[s.several.length - 1];
    else s.chosen = i;
    draw();
  }
  selection = mountControls(parts.tv, s, draw);
  draw();
}

/** The token chips and the token view of a square section's maps (decoded (L, H, T, T)). */
export function tokenViewParts(section, maps, H) {
  const meta = sectionMeta(section);
  const list = el("ol", { class: "wp-tokens", "data-testid": "wp-tokens" });
  const tv = tokenViewCard();
  wireTokenView({ list, tv, meta, base: baseView(section, meta, maps, H) });
  const hint = "Choose a token to see what it reads in every head; shift- or ctrl-click more tokens for their rows at once.";
  return [card("Tokens", el("p", { class: "hint", text: hint }), list), tv];
}
