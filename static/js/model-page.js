// /model's shared page: what every card mounts over.  The page's data (limits, the
// models), its elements, the URL's state (model-state.js) and `view`, what the maps
// shown were computed from: one object, so each card is a module of its own and
// model.js only wires them.

import { byTestId, initialData } from "./dom.js";
import { ENCODER_DECODER } from "./model-state.js";
import { defaultState, readModelState, writeModelState } from "./model-state.js";

/** The page (see above); cards register themselves in page.cards. */
export function modelPage() {
  const init = initialData();
  const root = document.querySelector("main");
  const $ = (id) => byTestId(id, root);
  const models = (init.models && init.models.models) || [];
  const defaultModel = init.models ? init.models.default : null;
  const defaults = defaultState(init);
  /** The page's defaults for a model: a trained run opens with its own probe text. */
  const defaultsFor = (entry) => (!entry || !entry.probe ? defaults : { ...defaults, text: entry.probe, prompt: entry.probe });
  const urlModel = new URLSearchParams(window.location.search).get("model");
  const state = readModelState(defaultsFor(models.find((m) => m.name === urlModel && m.supported)));
  const entryOf = (name) => models.find((m) => m.name === (name || defaultModel)) || null;
  const page = {
    init,
    root,
    $,
    limits: init.limits || {},
    models,
    defaultModel,
    defaultsFor,
    state,
    entryOf,
    /** The chosen model's entry. */
    current: () => entryOf(state.model),
    writeUrl: () => writeModelState(state, defaultsFor(entryOf(state.model))),
    // What the maps shown were computed from (filled by model-run.js).
    view: {
      info: null, // GET /api/model?model=… of the maps shown
      meta: null, // the answer shown, without its maps: tokens, positions, generated…
      layers: new Map(), // layer number -> {heads, average, rollout}
      shown: null, // what the maps shown were computed from (for the step-by-step link)
      overview: false, // the grid holds pooled maps (the large map is fetched)
      mapRequest: null, // the text and options the maps shown came from
      rowSource: null, // pooled maps: one token's rows, asked for and kept (model-token-rows.js)
      explained: null, // {model, text, causal, tokens} of the maps whose cells are explained
      seq: 0, // the run shown (a newer run makes older answers stale)
      modelNote: null, // a problem with the URL's model, shown beside the picker
    },
    cards: {},
  };
  return page;
}

/** A plain encoder (a sentence pair, compare one word): not causal, not an encoder-decoder. */
export const isPlainEncoder = (entry) => Boolean(entry && !entry.causal && entry.kind !== ENCODER_DECODER);

/** A model without attention layers (a trained bigram): nothing to map, but it writes. */
export const hasNoLayers = (entry) => Boolean(entry && entry.layers === 0);
