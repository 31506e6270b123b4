// The model page's view state <-> its URL, and the links between /model and the
// explorer's real-head view. Only what differs from the page's defaults goes into
// the URL, so a link stays short; a text too long for a link is said so, not cut.

import { parseTokens } from "./model-multi-token.js";
import { URL_LIMIT, buildQuery } from "./state.js";

// An entry's kind for a model with an encoder and a decoder (T5, BART, Marian).
export const ENCODER_DECODER = "encoder-decoder";

export const EXTRA_MAPS = ["mean", "rollout"];

const int = (raw, min = 0) => {
  if (raw === null || raw === "" || !/^-?\d+$/.test(raw)) return null;
  const n = Number.parseInt(raw, 10);
  return n >= min ? n : null;
};
const num = (raw) => (raw === null || raw === "" || !Number.isFinite(Number(raw)) ? null : Number(raw));

/** The page's starting state from its defaults (the page's initial data). */
export function defaultState(init) {
  return {
    model: null, // null: the server's default model
    task: "read", // "read" | "generate"
    text: init.text || "",
    textB: init.text_b || "",
    prompt: init.prompt || "",
    maxNew: init.max_new_tokens ?? 20,
    sampling: "greedy", // "greedy" | "sample"
    temperature: 0.8,
    topK: null,
    seed: null,
    hide: false,
    scale: "map", // "map" | "fixed" | "log"
    sinkApart: false, // column 0 (the first token, an attention sink) left out of the colour range
    measure: "weights", // "weights" | "value_norm" (the maps' values)
    layer: 1,
    head: "1", // "1".."H", "mean" or "rollout"
    token: null, // the chosen token (index among the tokens shown), or null
    tokenLayer: null, // the token view's layer (null: the large map's)
    when: "written", // a generated token: "written" (the row before it) or "input" (its own row)
    tokens: [], // several chosen tokens (model-multi-token.js), or none
    combine: "mean", // their rows: "mean" or "sum"
    cw: { ...(init.compare || {}) },
    twoTexts: null, // the two-texts card's last comparison {a, b, model, layer, head}, or null
  };
}

/** State from a query string, over `defaults`. */
export function readModelState(defaults, search = window.location.search) {
  const p = new URLSearchParams(search);
  const s = structuredClone(defaults);
  if (p.get("model")) s.model = p.get("model");
  if (p.get("gen") === "1") s.task = "generate";
  if (p.has("text")) s.text = p.get("text");
  if (p.has("text_b")) s.textB = p.get("text_b");
  if (p.has("prompt")) s.prompt = p.get("prompt");
  if (p.has("n")) s.maxNew = int(p.get("n"), 1) ?? p.get("n");
  if (p.get("sample") === "1") s.sampling = "sample";
  if (p.has("temp")) s.temperature = num(p.get("temp")) ?? s.temperature;
  if (p.has("topk")) s.topK = int(p.get("topk"), 1);
  if (p.has("seed")) s.seed = int(p.get("seed"), 0);
  s.hide = p.get("hide") === "1";
  if (["fixed", "log"].includes(p.get("scale"))) s.scale = p.get("scale");
  s.sinkApart = p.get("sink") === "apart";
  if (p.get("measure") === "value_norm") s.measure = "value_norm";
  s.layer = int(p.get("layer"), 1) ?? s.layer;
  const head = p.get("head");
  if (head && (EXTRA_MAPS.includes(head) || /^\d+$/.test(head))) s.head = head;
  s.token = int(p.get("tok"), 0);
  s.tokenLayer = int(p.get("tl"), 1);
  if (p.get("when") === "input") s.when = "input";
  s.tokens = parseTokens(p.get("toks"));
  if (p.get("comb") === "sum") s.combine = "sum";
  if (p.has("ca")) s.cw.text_a = p.get("ca");
  if (p.has("cb")) s.cw.text_b = p.get("cb");
  if (p.has("w")) s.cw.word = p.get("w");
  if (p.get("tt") === "1") s.twoTexts = readTwoTexts(p, s.text);
  return s;
}

/** The two-texts card's comparison from `tt=1&tta=…&ttb=…&ttm=…&ttl=…&tth=…` (text A
 * left out: the page's text). */
function readTwoTexts(p, text) {
  return { a: p.has("tta") ? p.get("tta") : text, b: p.get("ttb") || "", model: p.get("ttm") || "", layer: int(p.get("ttl"), 1) ?? 1, head: int(p.get("tth"), 1) ?? 1 };
}

/** [key, value] pairs of the two-texts card's comparison (see readTwoTexts). */
function twoTextsPairs(t, text) {
  if (!t) return [];
  const pairs = [["tt", "1"]];
  if (t.a !== text) pairs.push(["tta", t.a]);
  if (t.b) pairs.push(["ttb", t.b]);
  if (t.model) pairs.push(["ttm", t.model]);
  return [...pairs, ["ttl", String(t.layer)], ["tth", String(t.head)]];
}

/** [key, value] pairs of what differs from the defaults, in a fixed order. */
export function modelStatePairs(s, d) {
  const pairs = [];
  const add = (key, value, base) => {
    if (value !== null && value !== undefined && value !== base) pairs.push([key, value]);
  };
  add("model", s.model, null);
  if (s.task === "generate") {
    pairs.push(["gen", "1"]);
    add("prompt", s.prompt, d.prompt);
    add("n", String(s.maxNew), String(d.maxNew));
    if (s.sampling === "sample") {
      pairs.push(["sample", "1"]);
      add("temp", String(s.temperature), String(d.temperature));
      add("topk", s.topK === null ? null : String(s.topK), null);
      add("seed", s.seed === null ? null : String(s.seed), null);
    }
  } else {
    add("text", s.text, d.text);
    add("text_b", s.textB, d.textB);
  }
  if (s.hide) pairs.push(["hide", "1"]);
  add("scale", s.scale, d.scale);
  if (s.sinkApart) pairs.push(["sink", "apart"]);
  add("measure", s.measure, d.measure);
  add("layer", String(s.layer), String(d.layer));
  add("head", s.head, d.head);
  add("tok", s.token === null ? null : String(s.token), null);
  add("tl", s.tokenLayer === null ? null : String(s.tokenLayer), null);
  add("toks", s.tokens.length ? s.tokens.join(",") : null, null);
  add("comb", s.combine, d.combine);
  add("when", s.when, d.when);
  add("ca", s.cw.text_a, d.cw.text_a);
  add("cb", s.cw.text_b, d.cw.text_b);
  add("w", s.cw.word, d.cw.word);
  pairs.push(...twoTextsPairs(s.twoTexts, s.task === "generate" ? null : s.text));
  return pairs;
}

/** Write the state into the address bar (replaceState); returns the query's length. */
export function writeModelState(s, d) {
  const query = buildQuery(modelStatePairs(s, d));
  // The hash is model-stacks.js' (an encoder-decoder's target, tab and word): kept.
  const url = (query ? `${window.location.pathname}?${query}` : window.location.pathname) + window.location.hash;
  if (url !== `${window.location.pathname}${window.location.search}${window.location.hash}`) window.history.replaceState(null, "", url);
  return query.length;
}

// ---------- links between /model and the explorer's real-head view ----------

/**
 * The explorer's view of one real head: `/?real=<model>&text=…&layer=…&head=…`; an
 * encoder-decoder's head adds its `stack` (encoder, decoder, cross) and `target` (and a
 * written target's `target_ids`).
 * Returns {href, length, fits}; a link longer than URL_LIMIT does not fit (href null).
 */
export function realHeadLink({ model, text, textB = "", target = "", targetIds = null, stack = "", layer, head }) {
  const pairs = [["real", model], ["text", text]];
  if (textB) pairs.push(["text_b", textB]);
  if (target) pairs.push(["target", target]);
  // A target the model wrote: its ids, so the head's rows are the map's (its text, tokenized
  // again, may split differently); the text stays for the way back.
  if (targetIds && targetIds.length) pairs.push(["target_ids", targetIds.join(",")]);
  if (stack) pairs.push(["stack", stack]);
  pairs.push(["layer", layer], ["head", head]);
  const query = buildQuery(pairs);
  const fits = query.length <= URL_LIMIT;
  return { href: fits ? `/?${query}` : null, length: query.length, fits };
}

/** What an explorer URL names for a real head: {model, text, textB, target, stack, layer, head} or null. */
export function readRealHead(search = window.location.search) {
  const p = new URLSearchParams(search);
  if (!p.has("real")) return null;
  return {
    model: p.get("real") || "",
    text: p.get("text"),
    textB: p.get("text_b") || "",
    target: p.get("target") || "",
    ...readTargetIds(p.get("target_ids")),
    stack: p.get("stack") || "",
    layer: int(p.get("layer"), 1),
    head: int(p.get("head"), 1),
    rawLayer: p.get("layer"),
    rawHead: p.get("head"),
  };
}

/** `target_ids=1,2,3` as {targetIds: [1, 2, 3]} (null when absent); a malformed list keeps its text in rawTargetIds. */
function readTargetIds(raw) {
  if (raw === null || raw === "") return { targetIds: null, rawTargetIds: null };
  const ids = raw.split(",").map((part) => int(part.trim()));
  return ids.every((id) => id !== null) ? { targetIds: ids, rawTargetIds: raw } : { targetIds: null, rawTargetIds: raw };
}

/**
 * Back from a real head to the model page, on the same text, layer and head; an
 * encoder-decoder's stack, target, layer and head go in the hash (model-stacks.js').
 */
export function modelPageLink({ model, text, textB = "", target = "", stack = "", layer, head }) {
  const pairs = [["model", model]];
  if (text) pairs.push(["text", text]);
  if (textB) pairs.push(["text_b", textB]);
  if (stack) return `/model?${buildQuery(pairs)}#${buildQuery([["target", target], ["stack", stack], ["layer", layer], ["head", head]])}`;
  if (layer) pairs.push(["layer", layer]);
  if (head) pairs.push(["head", head]);
  return `/model?${buildQuery(pairs)}`;
}

export { URL_LIMIT };
