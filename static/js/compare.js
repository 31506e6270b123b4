// The compare page: one attention layer, two sentences, and what happens to
// the words they share ("bank": same input vector, different context vector).

import { api, clearErrors, showErrors } from "./api.js";
import { byTestId, downloadJson, el, fillDatalist, initialData } from "./dom.js";
import { drawHeatmap } from "./heatmap.js";
import { dimLabels, tokenLabels } from "./labels.js";
import { modelDim, modelVectors } from "./model-vectors.js";
import { readCompareState, writeCompareState } from "./state.js";
import { splitSentence } from "./tokens.js";

const init = initialData();
const VOCAB = init.vocabulary || {};
const MAX_DIM = (init.limits && init.limits.max_dim) || 256;
const PRESETS = init.presets.filter((p) => p.compare_tokens);
const DEFAULT_PRESET = "bank-raw";
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);

let last = null;
let seq = 0;

/** The presets' specs came with the page (the same as GET /api/presets/{name}). */
function presetSpec(name) {
  return (PRESETS.find((p) => p.name === name) || PRESETS[0]).spec;
}

function averageHeads(trace) {
  const ms = trace.heads.map((h) => h.attn_weights);
  return ms[0].map((row, i) => row.map((_, j) => ms.reduce((s, m) => s + m[i][j], 0) / ms.length));
}

// Wide (model) vectors show their first 8 numbers; the plots below show all of them.
const vectorText = (v) =>
  v.length <= 12
    ? `[${v.map((x) => x.toFixed(3)).join(", ")}]`
    : `[${v.slice(0, 8).map((x) => x.toFixed(3)).join(", ")}, … ${v.length - 8} more]`;

function renderShared(shared, a, b) {
  const box = $("shared-panels");
  if (!shared.length) {
    box.replaceChildren(el("p", { class: "card hint", "data-testid": "no-shared", text: "The two sentences share no word: add the same word to both to compare it." }));
    return;
  }
  box.replaceChildren(
    ...shared.map((s) =>
      el("article", { class: "shared-card", "data-testid": "shared-card", "data-token": s.token }, [
        el("h2", {}, ["“", el("span", { "data-testid": "shared-token", text: s.token }), `” — word ${s.position_a + 1} of A, word ${s.position_b + 1} of B`]),
        el("span", { class: `big ${s.input_cosine > 0.9995 ? "same" : ""}`, "data-testid": "input-cosine", text: s.input_cosine.toFixed(3) }),
        el("span", { class: "what", text: s.input_cosine > 0.9995 ? "cosine of its two input vectors: identical going in." : "cosine of its two input vectors." }),
        el("span", { class: "big diff", "data-testid": "output-cosine", text: s.output_cosine.toFixed(3) }),
        el("span", { class: "what", text: `cosine of its two context vectors after attention (distance ${s.output_distance.toFixed(3)}): context changed it.` }),
        el("dl", { class: "vectors" }, [
          el("dt", { text: "context_vec in A" }),
          el("dd", { "data-testid": "context-a", text: vectorText(a.output[s.position_a]) }),
          el("dt", { text: "context_vec in B" }),
          el("dd", { "data-testid": "context-b", text: vectorText(b.output[s.position_b]) }),
        ]),
      ]),
    ),
  );
}

async function draw(result, shared) {
  const { a, b } = result;
  const la = tokenLabels(a.tokens);
  const lb = tokenLabels(b.tokens);
  const wa = a.num_heads > 1 ? averageHeads(a) : a.heads[0].attn_weights;
  const wb = b.num_heads > 1 ? averageHeads(b) : b.heads[0].attn_weights;
  const sharedA = shared.map((s) => s.position_a);
  const sharedB = shared.map((s) => s.position_b);
  const weightOpts = { kind: "weights", rowTitle: "token that attends", colTitle: "token attended to" };
  const ctxOpts = { kind: "signed", rowTitle: "token", colTitle: "dimension" };
  const diffRows = shared.map((s) => `${s.token} (A·${s.position_a}, B·${s.position_b})`);
  const diff = shared.map((s) => a.output[s.position_a].map((v, j) => v - b.output[s.position_b][j]));
  // One colour range for both context plots, so the same colour means the same number.
  const m = Math.max(...a.output.flat().map(Math.abs), ...b.output.flat().map(Math.abs)) || 1;
  const draws = [
    drawHeatmap($("plot-weights-a"), { ...weightOpts, z: wa, rows: la, cols: la, highlightRows: sharedA, filename: "compare-weights-a" }),
    drawHeatmap($("plot-weights-b"), { ...weightOpts, z: wb, rows: lb, cols: lb, highlightRows: sharedB, filename: "compare-weights-b" }),
    drawHeatmap($("plot-context-a"), { ...ctxOpts, z: a.output, rows: la, cols: dimLabels(a.output[0].length), highlightRows: sharedA, filename: "compare-context-a", zrange: m }),
    drawHeatmap($("plot-context-b"), { ...ctxOpts, z: b.output, rows: lb, cols: dimLabels(b.output[0].length), highlightRows: sharedB, filename: "compare-context-b", zrange: m }),
  ];
  const diffPlot = $("plot-context-diff");
  diffPlot.hidden = diff.length === 0;
  if (diff.length) {
    draws.push(drawHeatmap(diffPlot, { ...ctxOpts, z: diff, rows: diffRows, cols: dimLabels(diff[0].length), rowTitle: "shared token", filename: "compare-context-diff" }));
  }
  await Promise.all(draws);
}

function readForm() {
  return {
    preset: $("cmp-preset").value,
    a: $("tokens-a").value.trim(),
    b: $("tokens-b").value.trim(),
    embedding: $("cmp-embedding").value,
    causal: $("cmp-causal").checked,
  };
}

async function run() {
  const form = readForm();
  writeCompareState(form);
  clearErrors(root);
  const tokensA = splitSentence(form.a);
  const tokensB = splitSentence(form.b);
  const missing = [];
  if (!tokensA.length) missing.push(["tokens_a", "Type at least one word."]);
  if (!tokensB.length) missing.push(["tokens_b", "Type at least one word."]);
  if (form.embedding === "vocabulary") {
    for (const [field, tokens] of [["tokens_a", tokensA], ["tokens_b", tokensB]]) {
      const unknown = tokens.filter((t) => !(t in VOCAB));
      if (unknown.length) missing.push([field, `Not in the toy vocabulary: ${unknown.join(", ")}. Choose “hashed” or “model” embeddings for any word.`]);
    }
  }
  if (missing.length) {
    for (const [field, msg] of missing) root.querySelector(`[data-error-for="${field}"]`).textContent = msg;
    return;
  }
  const mine = ++seq;
  $("status").textContent = "Computing…";
  try {
    const spec = presetSpec(form.preset);
    let embedding = form.embedding === "hashed" ? { kind: "hashed", dim: 4, seed: 0 } : spec.embedding;
    let projection = spec.projection;
    if (form.embedding === "model") {
      // One vector per distinct word, as vocabulary words: a word shared by A and B gets the same one.
      // The toy words are replaced too, since a vocabulary's vectors must all be as wide.
      const words = [...new Set([...tokensA, ...tokensB, ...Object.keys(VOCAB)])];
      const vectors = await modelVectors(words, modelDim(MAX_DIM));
      embedding = { kind: "vocabulary", extra: Object.fromEntries(words.map((w, i) => [w, vectors[i]])) };
      // Hand-set W matrices fit 4-d toy vectors: keep their width, from nn.Linear's init.
      if (projection.kind === "explicit") projection = { kind: "seeded_linear", d_out: projection.W_query[0].length, seed: 789 };
    }
    if (mine !== seq) return;
    const body = {
      tokens_a: tokensA,
      tokens_b: tokensB,
      embedding,
      projection,
      num_heads: spec.num_heads,
      causal: form.causal,
      scale: spec.scale,
      mode: spec.mode,
    };
    const result = await api.compare(body);
    if (mine !== seq) return;
    last = { request: body, response: result };
    renderShared(result.shared, result.a, result.b);
    await draw(result, result.shared);
    $("status").textContent = "";
    root.dataset.ready = String(mine);
  } catch (err) {
    if (mine !== seq) return;
    showErrors(root, err);
    $("status").textContent = "";
  }
}

function boot() {
  fillDatalist(document.getElementById("vocab-list"), Object.keys(VOCAB));
  const select = $("cmp-preset");
  select.replaceChildren(...PRESETS.map((p) => el("option", { value: p.name, text: p.title })));
  const url = readCompareState();
  const preset = PRESETS.find((p) => p.name === (url.preset || DEFAULT_PRESET)) || PRESETS[0];
  select.value = preset.name;
  $("tokens-a").value = url.a ?? "stream bank mud";
  $("tokens-b").value = url.b ?? preset.compare_tokens.join(" ");
  $("cmp-embedding").value = ["hashed", "model"].includes(url.embedding) ? url.embedding : "vocabulary";
  $("cmp-causal").checked = url.causal ?? false;
  $("compare-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run();
  });
  for (const id of ["cmp-preset", "cmp-embedding", "cmp-causal"]) $(id).addEventListener("change", run);
  $("download-trace").addEventListener("click", () => last && downloadJson("attention-compare.json", last));
  run();
}

boot();
