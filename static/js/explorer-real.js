// The explorer showing one head of a real model: /?real=<model>&text=…&layer=…&head=…
// (linked from the large map on /model). The head's trace (POST /api/model/head) has
// /api/attention's shape, so the pipeline panels draw it as they draw a toy example;
// here they are captioned for a real layer (x after the layer's norm, RoPE's rotated
// and unrotated q and k, the decoder's mask), and nothing is editable.

import { byTestId, downloadJson, el, initialData } from "./dom.js";
import { showFieldError, showFieldErrors } from "./feedback.js";
import { drawHeatmap } from "./heatmap.js";
import { dimLabels, tokenLabels } from "./labels.js";
import { modelApi } from "./model-data.js";
import { plainModelError } from "./model-errors.js";
import { modelPageLink, readRealHead } from "./model-state.js";
import { drawPipeline } from "./pipeline.js";

// What the pages call each family: the server's (app/family_labels.py).
const FAMILIES = initialData().family_labels || {};
const LABELS = { model: "Model", text: "Text", text_b: "Second text", layer: "Layer", head: "Head" };

/** [title, text] of each panel for this head (the toy captions assume a toy spec). */
function captions(trace) {
  const d = trace.heads[0].q[0] ? trace.heads[0].q[0].length : 0;
  const shared = trace.kv_head !== trace.head ? ` (key/value head ${trace.kv_head}, shared with other query heads)` : "";
  const rotated = " after RoPE: each pair of dimensions turned by an angle that grows with the token's position.";
  return {
    x: ["x", " The layer's input after its norm (LayerNorm; RMSNorm in Llama-family models): one row per token."],
    q: trace.rope
      ? ["q = RoPE(x @ W_query)", ` This head's queries${rotated}`]
      : ["q = x @ W_query", " This head's queries: x times its slice of W_query, plus the bias if the model has one."],
    k: trace.rope
      ? ["k = RoPE(x @ W_key)", ` The keys${shared}${rotated}`]
      : ["k = x @ W_key", ` The keys this head matches against${shared}.`],
    v: ["v = x @ W_value", ` The values this head averages${shared}.`],
    scaled_scores: ["scaled_scores", ` The scores times ${trace.scale.toPrecision(4)} (1/sqrt(d_k), d_k = ${d}).`],
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

/** A panel for a step the toy pipeline has no place for (RoPE's unrotated q and k), before `next`. */
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
  const parts = [
    `${trace.model}: ${FAMILIES[trace.family] || trace.family} ${trace.causal ? "decoder" : "encoder"}`,
    `${T} token${T === 1 ? "" : "s"}`,
    `layer ${trace.layer}, head ${trace.head}`,
    `d_k = ${trace.heads[0].q[0].length}`,
  ];
  if (trace.kv_head !== trace.head) parts.push(`reads key/value head ${trace.kv_head}`);
  if (trace.rope) parts.push("rotary positions (RoPE)");
  return parts.join(" · ");
}

/** Problems of the link itself, before asking the model. */
function linkProblems(asked) {
  const problems = [];
  if (!asked.model) problems.push("This link names no model (real=…): open a head from the model page.");
  if (!asked.text) problems.push("This link names no text (text=…): open a head from the model page, whose links carry the text up to 2,000 characters.");
  if (asked.layer === null) problems.push(`The layer must be a whole number from 1 (the link says “${asked.rawLayer ?? ""}”).`);
  if (asked.head === null) problems.push(`The head must be a whole number from 1 (the link says “${asked.rawHead ?? ""}”).`);
  return problems;
}

export async function bootRealHead(root) {
  const $ = (id) => byTestId(id, root);
  const asked = readRealHead();
  const pipeline = $("pipeline");
  $("real-back").href = modelPageLink(asked);
  pipeline.querySelector('[data-step="output"]').hidden = true; // one head has no output projection
  $("head-tabs").replaceChildren(
    el("button", { type: "button", role: "tab", "aria-selected": "true", "data-testid": "head-tab-0", text: `layer ${asked.rawLayer}, head ${asked.rawHead}` }),
  );
  const status = $("status");
  const problems = linkProblems(asked);
  if (problems.length) {
    for (const text of problems) showFieldError(root, "general", text);
    $("real-head-facts").textContent = "Nothing to show.";
    return;
  }
  status.textContent = "Running the model…";
  const request = { model: asked.model, text: asked.text, layer: asked.layer, head: asked.head };
  if (asked.textB) request.text_b = asked.textB;
  let trace;
  try {
    trace = await modelApi.head(request);
  } catch (err) {
    showFieldErrors(root, plainModelError(err), (path) => ({ key: "general", label: LABELS[path[0]] }));
    $("real-head-facts").textContent = "The model could not show this head.";
    status.textContent = "";
    return;
  }
  $("real-head-facts").textContent = facts(trace);
  root.dataset.model = trace.model;
  for (const [key, caption] of Object.entries(captions(trace))) setCaption(pipeline.querySelector(`[data-step="${key}"]`), caption);
  const done = drawPipeline(pipeline, shownTrace(trace), "0");
  const steps = trace.heads[0];
  if (trace.rope) {
    const labels = tokenLabels(trace.tokens);
    const unrotated = [
      ["q_unrotated", "q before RoPE = x @ W_query", " The queries before the rotation.", "q"],
      ["k_unrotated", "k before RoPE = x @ W_key", " The keys before the rotation.", "k"],
    ];
    for (const [key, title, text, before] of unrotated) {
      const plot = extraPanel(pipeline.querySelector(`[data-step="${before}"]`), key, title, text);
      await drawHeatmap(plot, {
        z: steps[key],
        rows: labels,
        cols: dimLabels(steps[key][0].length),
        rowTitle: "attends (query)",
        colTitle: "dimension",
        thinCols: true,
        filename: `attention-${key}`,
      });
    }
  }
  $("download-trace").addEventListener("click", () => downloadJson("real-head-trace.json", { request, response: trace }));
  $("copy-link").addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(window.location.href);
      status.textContent = "Link copied.";
    } catch {
      status.textContent = "The link is in the address bar.";
    }
  });
  if (await done) {
    status.textContent = "";
    root.dataset.ready = "real";
  }
}
