// The token editor: removable chips, an "add a word" input (the whole text is
// one token, so words with spaces or markup stay intact) and a sentence input.
// Inputs are capped at the server's limits at once, with a message saying so.

import { el } from "./dom.js";

/**
 * Chips for `tokens`. onRemove(i) removes one; with onChoose(i) the token's text is a
 * button that chooses it (aria-pressed for `chosen`); marks[i], when set, is a short
 * note shown on the chip (e.g. that the model does not know it).
 */
export function renderChips(list, tokens, onRemove, { onChoose, chosen = null, marks = [], what = "token" } = {}) {
  list.replaceChildren(
    ...tokens.map((token, i) =>
      el("li", { class: `chip${marks[i] ? " chip-marked" : ""}`, "data-testid": "token-chip", title: marks[i] || null }, [
        onChoose
          ? el("button", {
              type: "button",
              class: "chip-text",
              "data-testid": "token-chip-choose",
              "aria-pressed": String(chosen === i),
              "aria-label": `${token}: show what ${what} ${i + 1} reads`,
              text: token,
              onclick: () => onChoose(i),
            })
          : el("span", { class: "chip-text", text: token }),
        el("button", {
          type: "button",
          class: "chip-remove",
          "aria-label": `Remove ${what} ${i + 1}: ${token}`,
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

const count = (n) => n.toLocaleString("en-US");

/**
 * At most maxTokens tokens of at most maxChars characters each (the server's limits).
 * Returns {tokens, notes}: notes say in plain words what was cut, if anything.
 */
export function capTokens(words, { maxTokens, maxChars }) {
  const notes = [];
  let tokens = words;
  if (tokens.length > maxTokens) {
    notes.push(
      `Kept the first ${count(maxTokens)} of ${count(words.length)} words: this server takes at most ${count(maxTokens)} tokens per sequence (ATTENTION_VIZ_MAX_TOKENS).`,
    );
    tokens = tokens.slice(0, maxTokens);
  }
  const long = tokens.filter((t) => Array.from(t).length > maxChars);
  if (long.length) {
    notes.push(
      `${long.length === 1 ? "One word was" : `${long.length} words were`} longer than ${maxChars} characters and ${long.length === 1 ? "was" : "were"} cut to ${maxChars} (ATTENTION_VIZ_MAX_TOKEN_CHARS).`,
    );
    // The server counts code points (Python's len), as Array.from does.
    tokens = tokens.map((t) => (Array.from(t).length > maxChars ? Array.from(t).slice(0, maxChars).join("") : t));
  }
  return { tokens, notes };
}

/** A live count under a sentence input: how many words it has and how many will be used. */
export function sentenceCount(text, maxTokens) {
  const n = splitSentence(text).length;
  if (n <= maxTokens) return "";
  return `${count(n)} words: only the first ${count(maxTokens)} will be used (the server's limit).`;
}

/**
 * Wire one token editor: an "add a word" input and button (onWord(word) -> whether it was
 * taken, which clears the input) and a sentence input and button (onSentence(words)),
 * with a live count under the sentence when it has more than maxTokens words.
 */
export function bindTokenEditor({ input, add, sentence, use, count }, { maxTokens, onWord, onSentence }) {
  const addWord = () => {
    const word = input.value.trim();
    if (word && onWord(word)) input.value = "";
  };
  const useSentence = () => {
    const words = splitSentence(sentence.value);
    count.textContent = "";
    if (words.length) onSentence(words);
  };
  const onEnter = (fn) => (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      fn();
    }
  };
  add.addEventListener("click", addWord);
  input.addEventListener("keydown", onEnter(addWord));
  use.addEventListener("click", useSentence);
  sentence.addEventListener("keydown", onEnter(useSentence));
  sentence.addEventListener("input", () => {
    count.textContent = sentenceCount(sentence.value, maxTokens);
  });
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
