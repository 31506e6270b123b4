// The real-model page: any model the server has (a picker), its attention for every
// layer and head (compact uint8 per layer, drawn on canvas), one map large, head
// averages and rollout, a decoder's generation, one token's weights in every head,
// a link from any head to its steps in the explorer, and (encoders) one word's
// cosine across two texts, layer by layer.
//
// This module only wires the cards, each a module mounted over the page's state
// (model-page.js): the form (model-form.js), the grid (model-maps-card.js), the large
// map (model-zoom-card.js), the tokens (model-token-card.js), the analysis cards
// (model-heads.js, model-attribution.js, model-why.js), an encoder-decoder's stacks
// (model-stacks.js) and compare-one-word (model-compare-word.js); model-run.js runs
// the model.

import { mountCompareWord } from "./model-compare-word.js";
import { stackFields } from "./model-encdec.js";
import { applyKind, bindForm, checkUrlModel, fillForm } from "./model-form.js";
import { lazy } from "./model-lazy.js";
import { mountMaps } from "./model-maps-card.js";
import { isPlainEncoder, modelPage } from "./model-page.js";
import { ENCODER_DECODER } from "./model-state.js";
import { progressBar } from "./model-progress.js";
import { runModel } from "./model-run.js";
import { mountTokens } from "./model-token-card.js";
import { mountTwoTexts } from "./model-two-texts.js";
import { setupWhy } from "./model-why.js";
import { mountZoom } from "./model-zoom-card.js";

const page = modelPage();
const { $, state, cards } = page;

/** Open layer `layer`'s map `head` (a grid button, the arrow keys, a head named by a card). */
function select(layer, head, focus = false) {
  const layerChanged = layer !== state.layer;
  state.layer = layer;
  state.head = head;
  cards.maps.markSelected();
  if (focus) cards.maps.focus(layer, head);
  page.writeUrl();
  cards.zoom.draw();
  if (layerChanged && state.tokenLayer === null) cards.tokens.draw();
}

/** A head named by the analysis cards: its map, in sight (an encoder-decoder's stack's: the stacks card's). */
function openHead(layer, head, stack = null) {
  if (stack) {
    cards.stacks.open(stack, layer, head);
    return;
  }
  select(layer, String(head));
  $("zoom-card").scrollIntoView({ block: "nearest" });
}

cards.progress = progressBar($("model-progress"));
cards.maps = mountMaps(page, { select });
cards.tokens = mountTokens(page, { shows: (l) => cards.maps.shows(l), onChosen: () => cards.zoom.mark() });
// Why a clicked cell (model-why.js): its click handler runs before the zoom card's,
// which chooses the row's token and may scroll the token view into sight.
cards.why = setupWhy({
  card: $("why-cell"),
  zoom: $("zoom-plot"),
  context: () => (page.view.explained && /^\d+$/.test(state.head) ? { ...page.view.explained, layer: state.layer, head: Number(state.head), fields: encoderFields() } : null),
});

/** An encoder-decoder's large map is its encoder's: the why card's stack, with the stacks card's target. */
function encoderFields() {
  const { pick, text } = page.view.explained;
  return pick ? () => ({ ...stackFields(pick, text), stack: "encoder" }) : null;
}

/** A cell of the stacks card's large map (any stack), explained in the why card. */
function explainStackCell({ stack, target, text, layer, head, row, col }) {
  cards.why.explain({ model: state.model, text, layer, head, fields: () => ({ stack, target }) }, row, col);
}
cards.zoom = mountZoom(page, { choose: (row) => cards.tokens.choose(row) });
// Below the fold, loaded once the first maps are shown (model-lazy.js).
cards.analysis = lazy(() => import("./model-heads.js").then((m) => m.setupHeadAnalysis({ container: $("head-analysis"), openHead })));
cards.attribution = lazy(() => import("./model-attribution.js").then((m) => m.setupAttribution({ card: $("attribution"), openHead })));
cards.stacks = stacksCard();
cards.compareWord = mountCompareWord(page);
// Two texts (or two checkpoints), one head, and their difference (model-two-texts.js).
cards.twoTexts = mountTwoTexts($("two-texts"), {
  models: page.models,
  defaultModel: page.defaultModel,
  page: () => ({ model: state.model, text: state.text, layer: state.layer, head: state.head }),
  saved: state.twoTexts, // a comparison the URL kept (tt=1&ttb=…)
  onCompare: (inputs) => {
    state.twoTexts = inputs;
    page.writeUrl();
  },
});

/** Encoder-decoders: the three stacks and the alignment view (model-stacks.js), loaded
 * for the first such model; until then the card stays hidden and the URL keeps no hash
 * of its view. */
function stacksCard() {
  const card = lazy(() =>
    import("./model-stacks.js").then((m) => {
      const card = m.initStacks({ models: page.models, defaultModel: page.defaultModel, limits: page.limits, form: $("model-form"), sourceText: () => $("model-text").value, modelName: () => state.model });
      card.onCell(explainStackCell);
      return card;
    }),
  );
  let loaded = false;
  return {
    update() {
      const entry = page.current();
      loaded = loaded || Boolean(entry && entry.kind === ENCODER_DECODER);
      if (loaded) return card.update();
      const { pathname, search, hash } = window.location;
      if (hash) window.history.replaceState(null, "", `${pathname}${search}`);
    },
    /** The stack and target chosen there (model-encdec.js), or null before it is loaded. */
    choice: () => (loaded ? card.choice() || null : null),
    open: (stack, layer, head) => card.open(stack, layer, head),
  };
}

const run = () => runModel(page);
/** The colours changed (scale, sink): every map drawn again from what the page holds. */
function redraw() {
  cards.maps.redraw();
  cards.zoom.redraw();
  cards.tokens.draw();
}
bindForm(page, { run, redraw, stacks: cards.stacks });

// Plotly is not on this page until a reader reaches for a plot (heatmap.js).
checkUrlModel(page);
fillForm(page);
applyKind(page);
cards.stacks.update();
cards.twoTexts.restore();
run().then(() => {
  if (isPlainEncoder(page.current()) && state.cw.text_a && state.cw.text_b && state.cw.word) cards.compareWord.run();
});
