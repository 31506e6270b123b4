// What the explorer tells a reader about the vectors their words got: why the page
// chose MiniLM (or hashed) vectors, and which words MiniLM's vocabulary lacks.

import { el } from "./dom.js";
import { MODEL_WIDTH } from "./model-vectors.js";

/** Words as <code> items, at most `max` of them and a count of the rest. */
export const quoted = (words, max = 6) =>
  words
    .slice(0, max)
    .flatMap((w, i) => [i ? ", " : "", el("code", { text: w })])
    .concat(words.length > max ? [`, … (${words.length} in all)`] : []);

/**
 * The notice after words outside the toy vocabulary switched the embedding.
 * auto: {kind: "model" | "hashed", words, why} or null; shown while `current` is that kind.
 * onHashed() switches to hashed vectors; onOwn() goes back to the toy vocabulary; dim: the
 * width the vectors are sent with (MiniLM's 384 are projected at random to it when narrower).
 */
export function renderEmbeddingNotice(box, auto, current, { onHashed, onOwn, dim = MODEL_WIDTH }) {
  box.hidden = !auto || auto.kind !== current;
  if (box.hidden) return box.replaceChildren();
  const narrowed =
    dim < MODEL_WIDTH
      ? `: its ${MODEL_WIDTH} numbers projected to this page's ${dim} by one fixed random ${MODEL_WIDTH} × ${dim} matrix, which keeps lengths and angles roughly`
      : "";
  const which =
    auto.kind === "model"
      ? `so every word gets MiniLM's word vector (the pretrained model's embedding table: one fixed vector per word, no context)${narrowed}.`
      : `so every word gets a hashed vector (a fixed random vector per word)${auto.why ? `: ${auto.why}` : ""}.`;
  box.replaceChildren(
    el("p", {}, [
      auto.words.length === 1 ? "This word is not in the toy vocabulary: " : "These words are not in the toy vocabulary: ",
      ...quoted(auto.words),
      `, ${which}`,
    ]),
    el("div", { class: "inline-actions" }, [
      auto.kind === "model"
        ? el("button", { type: "button", "data-testid": "use-hashed-instead", text: "Use hashed vectors instead", onclick: onHashed })
        : null,
      onOwn ? el("button", { type: "button", "data-testid": "own-vectors", text: "Give these words my own vectors", onclick: onOwn }) : null,
    ]),
  );
}

/**
 * MiniLM turns what its vocabulary lacks (emoji, rarer scripts) into [UNK]: name those
 * words in `box` (hidden when there are none). Reusable wherever WordPieces are known.
 */
export function renderUnknownPieces(box, words, model = "MiniLM") {
  box.hidden = words.length === 0;
  box.replaceChildren(
    ...(words.length
      ? [
          `${model}'s vocabulary lacks `,
          ...quoted(words),
          ` (in whole or in part): ${words.length === 1 ? "it becomes" : "each becomes"} the token `,
          el("code", { text: "[UNK]" }),
          `, so ${words.length === 1 ? "its vector is" : "their vectors are"} that one token's vector (or mixed with it) and say little about the word.`,
        ]
      : []),
  );
}
