// The model page's errors: each beside the control it belongs to (the picker, the
// text, the prompt, max new tokens…), in plain words rather than the server's or
// pydantic's: each worded from its type and ctx, never from its sentence. Pydantic's
// types are worded by feedback.js; the model routes' own are worded here first.

import { ApiError } from "./api.js";
import { fieldPath } from "./feedback.js";

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

/** What sets a model input's limit, in words: the model's context or a server setting. */
const why = (setting) => (setting === "model_context" ? "its context" : `the server's limit, ${setting}`);

/** The model routes' errors as a reader would put them, from each item's stable type
 * and ctx (app/errors.py) and the field it names; null leaves an item to feedback.js. */
function sayModelError(item) {
  const [field] = fieldPath(item);
  const c = item.ctx || {};
  if (item.type === "model_not_found" && c.name !== undefined) {
    return `There is no model called “${c.name}” on this server. Choose one from the list.`;
  }
  if (item.type === "empty_input" && field in PLACES) return `${PLACES[field]} is empty: type at least one word.`;
  if (item.type === "pair_needs_encoder") return "A second text (a sentence pair) is for encoders only: put the whole text in Text.";
  if (item.type !== "limit_exceeded") return null;
  if (c.prompt_tokens !== undefined) {
    const room = c.limit - c.prompt_tokens;
    return room > 0
      ? `The prompt is ${n(c.prompt_tokens)} tokens and this model reads at most ${n(c.limit)}, so it can write at most ${n(room)} more (not ${n(c.max_new_tokens)}).`
      : `The prompt already fills this model's ${n(c.limit)} positions: shorten it.`;
  }
  if (field === "max_new_tokens") {
    return `Max new tokens: ${n(c.found)} is more than this server writes at once (at most ${n(c.limit)}; ${c.setting}).`;
  }
  if (["text", "text_b", "prompt"].includes(field) && c.setting !== "MAX_JSON_WEIGHTS") {
    const unit = c.unit || "tokens long";
    return `${PLACES[field]} is ${n(c.found)} ${unit}; this model reads at most ${n(c.limit)} (${why(c.setting)}). Shorten it.`;
  }
  return null;
}

function plainItem(item) {
  const msg = sayModelError(item);
  return msg === null ? item : { ...item, msg, worded: true };
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
