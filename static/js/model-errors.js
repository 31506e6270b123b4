// The model page's errors: each beside the control it belongs to (the picker, the
// text, the prompt, max new tokens…), in plain words rather than the server's or
// pydantic's. Pydantic's wording is translated by feedback.js; the model routes'
// own messages are rewritten here first.

import { ApiError } from "./api.js";

// Request fields -> the error box (data-error-for) and the words for the control.
const PLACES = {
  model: "Model",
  text: "Text",
  text_b: "Second text",
  prompt: "Prompt",
  max_new_tokens: "Max new tokens",
  temperature: "Temperature",
  top_k: "Top-k",
  seed: "Seed",
};

/** {key, label} of the error box for a field path (["prompt"], ["layers", 0]…). */
export function modelErrorPlace(path) {
  const field = typeof path[0] === "string" ? path[0] : "";
  return field in PLACES ? { key: field, label: PLACES[field] } : { key: "general" };
}

const n = (s) => Number(s).toLocaleString("en-US");

// The model routes' messages, as a reader would put them. Each gets (match, item).
const RULES = [
  [
    /^unknown model '(.*)'; the models are: .*$/s,
    ([, name]) => `There is no model called “${name}” on this server. Choose one from the list.`,
  ],
  [
    /^(text|text_b|prompt) is (\d+) tokens; the limit is (\d+) \((.+)\)$/,
    ([, field, count, limit, why]) =>
      `${PLACES[field]} is ${n(count)} tokens long; this model reads at most ${n(limit)} (${why}). Shorten it.`,
  ],
  [
    /^(text and text_b are|text is) (\d+) WordPiece tokens including \[CLS\] and \[SEP\]; the limit is (\d+)$/,
    ([, what, count, limit]) =>
      `${what.startsWith("text and") ? "The two texts are" : "The text is"} ${n(count)} WordPiece tokens (with [CLS] and [SEP]); this model reads at most ${n(limit)}. Shorten it.`,
  ],
  [
    /^the prompt \((\d+) tokens\) and max_new_tokens \((\d+)\) make (\d+) positions; this model reads at most (\d+)$/,
    ([, prompt, asked, , context]) => {
      const room = Number(context) - Number(prompt);
      return room > 0
        ? `The prompt is ${n(prompt)} tokens and this model reads at most ${n(context)}, so it can write at most ${n(room)} more (not ${n(asked)}).`
        : `The prompt already fills this model's ${n(context)} positions: shorten it.`;
    },
  ],
  [
    /^max_new_tokens is (\d+); the limit is (\d+) \((ATTENTION_VIZ_\w+)\)$/,
    ([, asked, limit, env]) => `Max new tokens: ${n(asked)} is more than this server writes at once (at most ${n(limit)}; ${env}).`,
  ],
  [/^(text|text_b|prompt) is empty; give at least one word$/, ([, field]) => `${PLACES[field]} is empty: type at least one word.`],
  [
    /^text_b \(a sentence pair\) is for encoders; .*$/,
    () => "A second text (a sentence pair) is for encoders only: put the whole text in Text.",
  ],
];

function plainItem(item) {
  const msg = String(item.msg || "");
  for (const [pattern, say] of RULES) {
    const m = msg.match(pattern);
    if (m) return { ...item, msg: say(m, item) };
  }
  return item;
}

/** The same error with the model routes' messages in plain words (feedback.js does pydantic's). */
export function plainModelError(err) {
  if (!(err instanceof ApiError)) return err;
  return new ApiError(err.status, err.detail.map(plainItem));
}

/**
 * What the form holds that cannot be sent, found here before asking the server:
 * [[key, message], …]. limits: {max_new_tokens}.
 */
export function generationProblems({ maxNew, sampling, temperature, topK, seed }, limits) {
  const problems = [];
  const limit = limits.max_new_tokens;
  if (!Number.isInteger(maxNew) || maxNew < 1) problems.push(["max_new_tokens", "Max new tokens must be a whole number, at least 1."]);
  else if (limit && maxNew > limit) {
    problems.push(["max_new_tokens", `Max new tokens: ${n(maxNew)} is more than this server writes at once (at most ${n(limit)}; ATTENTION_VIZ_MAX_NEW_TOKENS).`]);
  }
  if (sampling === "sample") {
    if (!Number.isFinite(temperature) || temperature <= 0 || temperature > 100) {
      problems.push(["temperature", "Temperature must be a number above 0 and at most 100 (0 would be greedy)."]);
    }
    if (topK !== null && (!Number.isInteger(topK) || topK < 1)) problems.push(["top_k", "Top-k must be a whole number, at least 1, or empty."]);
    if (seed !== null && (!Number.isInteger(seed) || seed < 0)) problems.push(["seed", "Seed must be a whole number, 0 or more, or empty."]);
  }
  return problems;
}
