// The analysis cards on /model for an encoder-decoder (Marian, BART, T5): ablation,
// attribution and "why this cell" ask about one stack's heads (encoder, decoder or
// cross) and read the decoder's log p of a target.  Both come from the stacks card
// (model-stacks.js): its tab chosen and the target it shows (the one the model wrote,
// or the one typed there).  pick() gives {stack, target, text, layers, heads} (target
// null until the card has read or written one; layers and heads the stack's own, once
// it has maps).

import { el } from "./dom.js";

/** The event the stacks card sends (bubbling) when its tab or maps change. */
export const STACK_CHOSEN = "stack-chosen";

/** The grid's {layers, heads} for a card's context: the chosen stack's own (an
 * encoder-decoder's decoder may be deeper than its encoder), else the model's. */
export function stackShape(context) {
  const chosen = context.pick ? context.pick() : null;
  if (chosen && chosen.layers) return { stack: chosen.stack, layers: chosen.layers, heads: chosen.heads };
  return { stack: null, layers: context.layers, heads: context.heads };
}

/** The hint each card shows for an encoder-decoder. */
export const STACK_HINT =
  "Encoder-decoder: the heads are those of the stack chosen in “Encoder, decoder and cross-attention” above (its tabs), and the loss is the decoder's mean −log p of the target shown there (the model's own translation, or the one you type there).";

/** A hint paragraph (hidden until show(on)). */
export function stackHint(testid) {
  const hint = el("p", { class: "hint stack-hint", "data-testid": testid, text: STACK_HINT, hidden: true });
  return { element: hint, show: (on) => (hint.hidden = !on) };
}

/** The request's `stack` and `target` for pick() (none for a one-stack model); throws
 * a plain error while the stacks card has no target for the text shown. */
export function stackFields(pick, text) {
  if (!pick) return {};
  const chosen = pick();
  if (!chosen || chosen.target === null || chosen.text !== text)
    throw new Error("The stacks card below has no target for this text yet: wait for it to write one, or type one there and press “Show attention”.");
  return { stack: chosen.stack, target: chosen.target };
}

/** A card's openHead(layer, head) for an answer: an encoder-decoder's head opens in its
 * answer's stack (openHead's third argument; model.js shows it in the stacks card). */
export const opener = (openHead, answer) => (answer.stack ? (layer, head) => openHead(layer, head, answer.stack) : openHead);

/** "the cross stack's " for an answer that names its stack, else "". */
export const stackWords = (answer) => (answer.stack ? `the ${answer.stack} stack's ` : "");
