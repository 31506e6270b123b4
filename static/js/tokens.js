// The token editor: removable chips, an "add a word" input (the whole text is
// one token, so words with spaces or markup stay intact) and a sentence input.

import { el } from "./dom.js";

export function renderChips(list, tokens, onRemove) {
  list.replaceChildren(
    ...tokens.map((token, i) =>
      el("li", { class: "chip", "data-testid": "token-chip" }, [
        el("span", { class: "chip-text", text: token }),
        el("button", {
          type: "button",
          class: "chip-remove",
          "aria-label": `Remove token ${i + 1}: ${token}`,
          text: "×",
          onclick: () => onRemove(i),
        }),
      ]),
    ),
  );
}

export function splitSentence(text) {
  return text.split(/\s+/).filter(Boolean);
}

/**
 * For words missing from the vocabulary: offer to add a vector (dim numbers)
 * or to switch to hashed embeddings. Calls onAdd(word, vector) or onHashed().
 */
export function renderUnknown(box, words, dim, { onAdd, onHashed }) {
  box.replaceChildren();
  box.hidden = words.length === 0;
  if (!words.length) return;
  box.append(
    el("p", {}, [
      words.length === 1 ? "This word is not in the toy vocabulary: " : "These words are not in the toy vocabulary: ",
      ...words.flatMap((w, i) => [i ? ", " : "", el("code", { text: w })]),
      ". Give each a vector, or use hashed embeddings (a fixed random vector per word).",
    ]),
  );
  for (const word of words) {
    const inputs = Array.from({ length: dim }, (_, j) =>
      el("input", { type: "number", step: "0.1", value: "0.5", class: "vec-input", "aria-label": `${word}: component ${j + 1}` }),
    );
    box.append(
      el("div", { class: "unknown-row", "data-testid": "unknown-row" }, [
        el("code", { text: word }),
        ...inputs,
        el("button", {
          type: "button",
          "data-testid": "add-vector",
          text: "Add this vector",
          onclick: () => onAdd(word, inputs.map((i) => Number(i.value) || 0)),
        }),
      ]),
    );
  }
  box.append(el("button", { type: "button", "data-testid": "use-hashed", text: "Use hashed embeddings instead", onclick: onHashed }));
}
