// The explorer showing one head of a real model: /?real=<model>&text=…&layer=…&head=…
// (linked from the large map on /model). The head's trace (POST /api/model/head) has
// /api/attention's shape, so the pipeline panels draw it as they draw a toy example;
// here they are captioned for a real layer (x after the layer's norm, RoPE's rotated
// and unrotated q and k, the decoder's mask, a score bias or soft-cap when the model has
// one), and nothing is editable.  An encoder-decoder's head names its `stack` (encoder,
// decoder, cross) and the `target` text; a cross head's keys and values are the source's.

import { byTestId, copyPageLink, downloadJson, el, initialData } from "./dom.js";
import { showFieldError, showFieldErrors } from "./feedback.js";
import { drawHeatmap } from "./heatmap.js";
import { dimLabels, tokenLabels } from "./labels.js";
import { modelApi } from "./model-data.js";
import { plainModelError } from "./model-errors.js";
import { modelPageLink, readRealHead } from "./model-state.js";
import { setupWhy } from "./model-why.js";
import { captionPipeline, drawPipeline } from "./pipeline.js";

// What the pages call each family: the server's (app/family_labels.py).
const FAMILIES = initialData().family_labels || {};
const LABELS = { model: "Model", text: "Text", text_b: "Second text", target: "Target", target_ids: "Target ids", stack: "Stack", layer: "Layer", head: "Head" };
// An encoder-decoder's stacks as the facts line says them.
const STACK_WORDS = { encoder: "encoder self-attention", decoder: "decoder self-attention", cross: "cross-attention" };

/** The scale's words: 1/sqrt(d_k), or the model's own (T5 does not scale its scores). */
function scaleWords(scale, d) {
  const usual = 1 / Math.sqrt(d);
  if (Math.abs(scale - usual) <= 1e-6 * usual) return `${scale.toPrecision(4)} (1/sqrt(d_k), d_k = ${d})`;
  return `${scale.toPrecision(4)}, this model's scale (1/sqrt(d_k) would be ${usual.toPrecision(4)}, d_k = ${d})`;
}

/** x times the head's slice of W_query (or W_key), through the family's q/k norm when it has one. */
function projected(trace, name) {
  const product = `x @ W_${name === "q" ? "query" : "key"}`;
  return trace.qk_norm ? `${name}_norm(${product})` : product;
}

/** The words for the q/k norm (Qwen3, OLMo 2, Gemma 3), or none. */
function normed(trace) {
  return trace.qk_norm ? ", normalized by the model's q/k norm (RMSNorm) before the rotation" : "";
}

/**
 * [title, text] of each panel for this head (the toy captions assume a toy spec). For
 * a cross head, k, v, the scores, the mask and the weights keep the server's
 * cross-attention words (captionPipeline): keys and values are the source's.
 */
function captions(trace) {
  const d = trace.heads[0].q[0] ? trace.heads[0].q[0].length : 0;
  const shared = trace.kv_head !== trace.head ? ` (key/value head ${trace.kv_head}, shared with other query heads)` : "";
  const rotated = " after RoPE: each pair of dimensions turned by an angle that grows with the token's position.";
  const shown = {
    x: trace.cross
      ? ["x", " The decoder's input to this layer after its norm: one row per target token."]
      : ["x", " The layer's input after its norm (LayerNorm; RMSNorm in Llama-family models): one row per token."],
    q: trace.rope
      ? [`q = RoPE(${projected(trace, "q")})`, ` This head's queries${normed(trace)}${rotated}`]
      : ["q = x @ W_query", " This head's queries: x times its slice of W_query, plus the bias if the model has one."],
    k: trace.rope
      ? [`k = RoPE(${projected(trace, "k")})`, ` The keys${shared}${normed(trace)}${rotated}`]
      : ["k = x @ W_key", ` The keys this head matches against${shared}.`],
    v: ["v = x @ W_value", ` The values this head averages${shared}.`],
    scaled_scores: ["scaled_scores", ` The scores times ${scaleWords(trace.scale, d)}.`],
    attn_weights: [
      "attn_weights = softmax(masked_scores)",
      ` Each row turned into weights that sum to 1: how much each token (row) takes from each token (column)${
        trace.causal ? "; the masked cells get no weight and stay blank" : ""
      }.`,
    ],
    masked_scores: [
      "masked_scores",
      trace.causal
        ? " A decoder's token may not read the tokens after it: those cells become −∞ (blank)."
        : " An encoder masks nothing: every token reads every token, so these are the scaled scores.",
    ],
  };
  if (trace.cross) for (const key of ["k", "v", "masked_scores", "attn_weights"]) delete shown[key];
  return shown;
}

/** The score bias adds nothing (T5's cross-attention passes zeros: its positions are the decoder's own). */
function zeroBias(steps) {
  return steps.biased_scores.every((row, i) => row.every((v, j) => v === steps.scaled_scores[i][j]));
}

/**
 * The panels the toy pipeline has no place for, when the trace has them, each before
 * the panel it feeds: RoPE's unrotated q and k, a cross head's source, the score bias
 * (T5's relative positions) and the soft-capped scores (Gemma 2).
 */
function extraSteps(trace) {
  const steps = trace.heads[0];
  const queries = tokenLabels(trace.tokens);
  const keys = tokenLabels(trace.source_tokens);
  const vectors = (z, rows) => ({ z, rows, cols: dimLabels(z[0].length), rowTitle: "attends (query)", colTitle: "dimension", thinCols: true });
  const scores = (z) => ({ z, rows: queries, cols: keys, rowTitle: "attends (query)", colTitle: "attended to (key)" });
  const extra = [];
  if (trace.cross && trace.source) {
    extra.push([
      "source",
      "k",
      "source",
      " The encoder's output, one row per source token: the keys and values are computed from it.",
      { ...vectors(trace.source, keys), rowTitle: "attended to (key)" },
    ]);
  }
  if (trace.rope) {
    extra.push(["q_unrotated", "q", `q before RoPE = ${projected(trace, "q")}`, ` The queries before the rotation${normed(trace)}.`, vectors(steps.q_unrotated, queries)]);
    extra.push(["k_unrotated", "k", `k before RoPE = ${projected(trace, "k")}`, ` The keys before the rotation${normed(trace)}.`, vectors(steps.k_unrotated, keys)]);
  }
  if (steps.biased_scores) {
    const zero = zeroBias(steps);
    extra.push([
      "biased_scores",
      "masked_scores",
      "biased_scores = scaled_scores + bias",
      zero
        ? " The model adds a score bias before the mask, but here it is 0 everywhere (T5's cross-attention has no relative positions): the same as scaled_scores."
        : " The scaled scores plus the model's score bias, before the mask: T5's learned bias for each distance between query and key (ALiBi's penalty in ALiBi models).",
      scores(steps.biased_scores),
    ]);
  }
  if (steps.capped_scores) {
    const c = trace.softcap;
    extra.push([
      "capped_scores",
      "masked_scores",
      `capped_scores = ${c} · tanh(scores / ${c})`,
      ` Logit soft-capping (Gemma 2): every score squashed smoothly into (−${c}, ${c}) before the mask.`,
      scores(steps.capped_scores),
    ]);
  }
  return extra;
}

/**
 * The trace as drawn: where masked_scores is masked (null), attn_weights is blank too
 * rather than a weight of 0 in the colour of the smallest weights. The downloaded
 * trace keeps the API's numbers.
 */
export function shownTrace(trace) {
  const steps = trace.heads[0];
  if (!steps.masked_scores.some((row) => row.includes(null))) return trace;
  const weights = steps.attn_weights.map((row, i) => row.map((v, j) => (steps.masked_scores[i][j] === null ? null : v)));
  return { ...trace, heads: [{ ...steps, attn_weights: weights }] };
}

function setCaption(panel, [title, text]) {
  panel.querySelector(".step-title").textContent = title;
  panel.querySelector(".step-text").textContent = text;
}

/** A panel for a step the toy pipeline has no place for (extraSteps), before `next`. */
function extraPanel(next, key, title, text) {
  let panel = next.parentNode.querySelector(`[data-step="${key}"]`);
  if (!panel) {
    panel = el("figure", { class: "panel real-extra", "data-step": key }, [
      el("figcaption", {}, [el("strong", { class: "step-title", text: title }), el("span", { class: "step-text", text })]),
      el("div", { class: "plot", "data-testid": `plot-${key}`, role: "img", "aria-label": `${title} heatmap` }),
    ]);
    next.before(panel);
  }
  return panel.querySelector(".plot");
}

function facts(trace) {
  const T = trace.tokens.length;
  const family = FAMILIES[trace.family] || trace.family;
  const parts = [
    trace.stack
      ? `${trace.model}: ${family} encoder-decoder, ${STACK_WORDS[trace.stack] || trace.stack}`
      : `${trace.model}: ${family} ${trace.causal ? "decoder" : "encoder"}`,
    trace.cross ? `${T} target and ${trace.source_tokens.length} source tokens` : "",
    trace.cross ? "" : `${T} token${T === 1 ? "" : "s"}`,
    `layer ${trace.layer}, head ${trace.head}`,
    `d_k = ${trace.heads[0].q[0].length}`,
  ];
  if (trace.kv_head !== trace.head) parts.push(`reads key/value head ${trace.kv_head}`);
  if (trace.rope) parts.push("rotary positions (RoPE)");
  if (trace.heads[0].biased_scores && !zeroBias(trace.heads[0])) parts.push("a score bias");
  if (trace.softcap !== null && trace.softcap !== undefined) parts.push(`soft-capped at ${trace.softcap}`);
  return parts.filter(Boolean).join(" · ");
}

/** Problems of the link itself, before asking the model. */
function linkProblems(asked) {
  const problems = [];
  if (!asked.model) problems.push("This link names no model (real=…): open a head from the model page.");
  if (!asked.text) problems.push("This link names no text (text=…): open a head from the model page, whose links carry the text up to 2,000 characters.");
  if (asked.layer === null) problems.push(`The layer must be a whole number from 1 (the link says “${asked.rawLayer ?? ""}”).`);
  if (asked.rawTargetIds !== null && asked.targetIds === null) problems.push(`The target ids must be whole numbers from 0, separated by commas (the link says “${asked.rawTargetIds}”).`);
  if (asked.head === null) problems.push(`The head must be a whole number from 1 (the link says “${asked.rawHead ?? ""}”).`);
  return problems;
}

export async function bootRealHead(root) {
  const $ = (id) => byTestId(id, root);
  const asked = readRealHead();
  const status = $("status");
  prepareRealPage(root, asked);
  const problems = linkProblems(asked);
  if (problems.length) {
    for (const text of problems) showFieldError(root, "general", text);
    $("real-head-facts").textContent = "Nothing to show.";
    return;
  }
  status.textContent = "Running the model…";
  const request = realHeadRequest(asked);
  let trace;
  try {
    trace = await modelApi.head(request);
  } catch (err) {
    showFieldErrors(root, plainModelError(err), (path) => ({ key: "general", label: LABELS[path[0]] }));
    $("real-head-facts").textContent = "The model could not show this head.";
    status.textContent = "";
    return;
  }
  const done = drawRealPipeline(root, trace);
  await drawExtraSteps($("pipeline"), trace);
  $("download-trace").addEventListener("click", () => downloadJson("real-head-trace.json", { request, response: trace }));
  $("copy-link").addEventListener("click", () => copyPageLink((text) => (status.textContent = text)));
  mountWhy(root, request, trace);
  if (await done) {
    status.textContent = "";
    root.dataset.ready = "real";
  }
}

/** The page as one head of the linked model: the way back, no output step, one tab naming the head. */
function prepareRealPage(root, asked) {
  byTestId("real-back", root).href = modelPageLink(asked);
  byTestId("pipeline", root).querySelector('[data-step="output"]').hidden = true; // one head has no output projection
  byTestId("head-tabs", root).replaceChildren(
    el("button", { type: "button", role: "tab", "aria-selected": "true", "data-testid": "head-tab-0", text: `layer ${asked.rawLayer}, head ${asked.rawHead}` }),
  );
}

/** POST /api/model/head's body for the link. */
function realHeadRequest(asked) {
  const request = { model: asked.model, text: asked.text, layer: asked.layer, head: asked.head };
  if (asked.textB) request.text_b = asked.textB;
  // The ids a generation answered, when the link has them: the map's own rows.
  if (asked.targetIds) request.target_ids = asked.targetIds;
  else if (asked.target) request.target = asked.target;
  if (asked.stack) request.stack = asked.stack;
  return request;
}

/** The head's facts and its captioned pipeline; a promise of whether the pipeline was drawn to the end. */
function drawRealPipeline(root, trace) {
  const pipeline = byTestId("pipeline", root);
  byTestId("real-head-facts", root).textContent = facts(trace);
  root.dataset.model = trace.model;
  captionPipeline(pipeline, trace.cross);
  for (const [key, caption] of Object.entries(captions(trace))) setCaption(pipeline.querySelector(`[data-step="${key}"]`), caption);
  return drawPipeline(pipeline, shownTrace(trace), "0");
}

/** The steps a real model adds (the unrotated q and k, a score bias, ...), each in a panel before the step it feeds. */
async function drawExtraSteps(pipeline, trace) {
  for (const [key, before, title, text, plot] of extraSteps(trace)) {
    const div = extraPanel(pipeline.querySelector(`[data-step="${before}"]`), key, title, text);
    await drawHeatmap(div, { ...plot, kind: "signed", filename: `attention-${key}` });
  }
}

/** Why a clicked cell of the weights map (model-why.js): one text's self-attention only. */
function mountWhy(root, request, trace) {
  const card = byTestId("why-cell", root);
  if (!card || trace.stack || request.text_b || request.target || request.target_ids) return;
  const context = { model: trace.model, text: request.text, layer: trace.layer, head: trace.head, tokens: trace.tokens, causal: trace.causal };
  setupWhy({ card, zoom: byTestId("plot-attn_weights", root), context: () => context, where: "the attention-weights map (attn_weights)" });
}
