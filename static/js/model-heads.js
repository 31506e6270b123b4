// Which heads matter, beside the maps on /model: three cards, each a module of its own,
// mounted into `container` over the maps shown: the heads' type scores
// (model-scores-card.js), ablation (model-ablate-card.js) and a decoder's logit lens
// (model-lens-card.js).
//
// setupHeadAnalysis({container, openHead}) returns {show(context), clear()}; context =
// {model, text, causal, layers, heads, pick} (model: null for the server's default;
// pick: an encoder-decoder's stack and target, model-encdec.js; its scores are the
// encoder's heads').  Requests still running when new maps are shown, or the page is
// left, are aborted.

import { mountAblation } from "./model-ablate-card.js";
import { mountLens } from "./model-lens-card.js";
import { mountScores } from "./model-scores-card.js";

export function setupHeadAnalysis({ container, openHead }) {
  let seq = 0;
  let controller = new AbortController(); // aborts the requests made for the maps shown
  const renew = () => {
    controller.abort();
    controller = new AbortController();
  };
  const live = { seq: () => seq, signal: () => controller.signal };
  const scores = mountScores({ openHead, live, visible: () => !container.hidden });
  const ablation = mountAblation({ openHead, live });
  const lens = mountLens({ live });
  container.replaceChildren(scores.element, ablation.element, lens.element);
  window.addEventListener("pagehide", renew);

  return {
    /** New maps are shown: score them, reset the ablation and the lens. */
    show(next) {
      ++seq;
      renew();
      ablation.show(next);
      lens.show(next);
      container.hidden = false;
      scores.show(next);
    },
    clear() {
      ++seq;
      renew();
      container.hidden = true;
    },
  };
}
