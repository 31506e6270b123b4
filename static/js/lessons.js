// The lessons page: why scores are divided by sqrt(d_k), and causal averaging
// versus a learned causal head. Every number comes from the API.

import { api } from "./api.js";
import { byTestId, initialData } from "./dom.js";
import { clearFieldErrors, markStale, showFieldError, showFieldErrors } from "./feedback.js";
import { drawFigure, drawHeatmap } from "./heatmap.js";
import { tokenLabels } from "./labels.js";
import { LIMITS } from "./limits.js";
import { readLessonState, writeLessonState } from "./state.js";

const init = initialData();
const root = document.querySelector("main");
const $ = (id) => byTestId(id, root);
const TRIALS = 2000;
// The slider's top: d_k = 2^10 = 1024, or less when the server samples less.
const MAX_POWER = Math.max(0, Math.min(10, Math.floor(Math.log2(LIMITS.max_lesson_dim)), LIMITS.max_lesson_dims - 1));

const dimOf = (index) => 2 ** Number(index);

/**
 * Random pairs per dimension: TRIALS, or fewer when sum(dims) × TRIALS would exceed the
 * server's sampling budget (ATTENTION_VIZ_MAX_LESSON_SAMPLES), so the request stays legal.
 */
export function trialsFor(dims) {
  const total = dims.reduce((s, d) => s + d, 0);
  return Math.max(2, Math.min(TRIALS, LIMITS.max_lesson_trials, Math.floor(LIMITS.max_lesson_samples / total)));
}
let varianceSeq = 0;
let sharpSeq = 0;

function debounce(fn, ms = 120) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** {scores} or {problem}: what the scores box holds, checked against the server's limits. */
function parseScores(text) {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (!parts.length) return { problem: "Type at least one score, e.g. 0.1 -0.2 0.9" };
  const bad = parts.find((p) => !Number.isFinite(Number(p)));
  if (bad !== undefined) return { problem: `“${bad}” is not a number: scores are numbers separated by spaces, e.g. 0.1 -0.2 0.9` };
  const values = parts.map(Number);
  if (values.length > LIMITS.max_lesson_scores) {
    return { problem: `${values.length} scores: this server takes at most ${LIMITS.max_lesson_scores} (one per token, ATTENTION_VIZ_MAX_TOKENS).` };
  }
  const big = values.find((v) => Math.abs(v) > LIMITS.max_abs_value);
  if (big !== undefined) return { problem: `${big} is too large: scores must lie between −1,000,000 and 1,000,000.` };
  return { scores: values };
}

/** Mark a lesson's plot and readout out of date ("" = stale; the reason is beside the control) or current (null). */
function stale(which, reason) {
  markStale($(`plot-${which}`), $(`stale-${which}`), reason);
  const readout = $(`${which}-readout`);
  if (reason === null) delete readout.dataset.stale;
  else readout.dataset.stale = "true";
}

function save() {
  writeLessonState({ dim: $("dim-slider").value, scale: $("scale-slider").value, scores: $("scores-input").value });
}

const strong = (text) => Object.assign(document.createElement("strong"), { textContent: text });

/** The widest d_k's variances, unscaled and scaled. */
function showVariance(d, lesson) {
  const last = lesson.variance[lesson.variance.length - 1];
  $("variance-readout").replaceChildren(
    `d_k = ${d}: Var(q·k) ≈ `,
    strong(last.variance_unscaled.toFixed(2)),
    ", Var(q·k / sqrt(d_k)) ≈ ",
    strong(last.variance_scaled.toFixed(2)),
    ` (${lesson.trials} random pairs).`,
  );
}

/** Var(q·k) and Var(q·k / sqrt(d_k)) against d_k, both axes log. */
function drawVariance(rows) {
  const x = rows.map((r) => r.dim);
  return drawFigure(
    $("plot-variance"),
    [
      { type: "scatter", mode: "lines+markers", name: "q·k (unscaled)", x, y: rows.map((r) => r.variance_unscaled), line: { color: "#ca0020" }, hovertemplate: "d_k=%{x}<br>variance %{y:.3f}<extra>unscaled</extra>" },
      { type: "scatter", mode: "lines+markers", name: "q·k / sqrt(d_k)", x, y: rows.map((r) => r.variance_scaled), line: { color: "#0571b0" }, hovertemplate: "d_k=%{x}<br>variance %{y:.3f}<extra>scaled</extra>" },
    ],
    {
      height: 300,
      margin: { l: 60, r: 10, t: 10, b: 50 },
      uirevision: "variance",
      legend: { orientation: "h", y: 1.12 },
      xaxis: { type: "log", title: { text: "d_k (width of q and k)" }, range: [-0.15, Math.log10(dimOf(MAX_POWER)) + 0.15], dtick: Math.log10(2) * 2, tickformat: "d" },
      yaxis: { type: "log", title: { text: "variance of the score" }, range: [-1, 3.3], dtick: 1 },
    },
    "lesson-variance",
  );
}

async function updateVariance() {
  const index = Number($("dim-slider").value);
  const d = dimOf(index);
  $("dim-value").textContent = String(d);
  const dims = Array.from({ length: index + 1 }, (_, i) => dimOf(i));
  const mine = ++varianceSeq;
  try {
    const lesson = await api.scaling({ dims, trials: trialsFor(dims), seed: 0, scores: [0], scales: [1] });
    if (mine !== varianceSeq) return;
    clearFieldErrors($("dims-controls"));
    stale("variance", null);
    showVariance(d, lesson);
    await drawVariance(lesson.variance);
  } catch (err) {
    if (mine !== varianceSeq) return;
    const shown = showFieldErrors($("dims-controls"), err, () => ({ key: "dims", label: "d_k" }));
    stale("variance", shown.length ? "" : null);
  }
}

/** The chosen scale's max weight and entropy, beside a uniform row's entropy over n scores. */
function showSharpness(scale, chosen, n) {
  $("sharpness-readout").replaceChildren(
    `× ${scale}: max weight `,
    strong(chosen.max_weight.toFixed(3)),
    ", entropy ",
    strong(chosen.entropy.toFixed(3)),
    ` nats (uniform = ${Math.log(n).toFixed(3)}, one-hot = 0).`,
  );
}

/** softmax(scores) and softmax(scores × scale) side by side, bar for bar. */
function drawSharpness(scale, scores, base, chosen) {
  const labels = scores.map((s, i) => `score ${i + 1}: ${s}`);
  return drawFigure(
    $("plot-sharpness"),
    [
      { type: "bar", name: "softmax(scores)", x: labels, y: base.weights, marker: { color: "#9ca3af" }, hovertemplate: "%{y:.3f}<extra>× 1</extra>" },
      { type: "bar", name: `softmax(scores × ${scale})`, x: labels, y: chosen.weights, marker: { color: "#0571b0" }, hovertemplate: "%{y:.3f}<extra>chosen</extra>" },
    ],
    {
      height: 300,
      barmode: "group",
      margin: { l: 60, r: 10, t: 10, b: 50 },
      uirevision: "sharpness",
      legend: { orientation: "h", y: 1.12 },
      yaxis: { range: [0, 1], title: { text: "attention weight" } },
    },
    "lesson-sharpness",
  );
}

async function updateSharpness() {
  const scale = Number($("scale-slider").value);
  $("scale-value").textContent = String(scale);
  const { scores, problem } = parseScores($("scores-input").value);
  const controls = $("scores-controls");
  const mine = ++sharpSeq;
  clearFieldErrors(controls);
  if (problem) {
    showFieldError(controls, "scores", problem);
    stale("sharpness", "");
    return;
  }
  try {
    const lesson = await api.scaling({ dims: [1], trials: 2, seed: 0, scores, scales: [1, scale] });
    if (mine !== sharpSeq) return;
    stale("sharpness", null);
    const [base, chosen] = lesson.sharpness;
    showSharpness(scale, chosen, scores.length);
    await drawSharpness(scale, scores, base, chosen);
  } catch (err) {
    if (mine !== sharpSeq) return;
    const shown = showFieldErrors(controls, err, () => ({ key: "scores", label: "Scores" }));
    stale("sharpness", shown.length ? "" : null);
  }
}

async function drawCausal() {
  try {
    const spec = (name) => init.presets.find((p) => p.name === name).spec;
    const [avg, head] = [{ spec: spec("causal-average") }, { spec: spec("gpt-head-2d") }];
    const steps = ["masked_scores", "attn_weights"];
    const [avgTrace, headTrace] = await Promise.all([
      api.attention({ ...avg.spec, steps }),
      api.attention({ ...head.spec, steps }),
    ]);
    const plots = [];
    for (const [trace, prefix] of [[avgTrace, "avg"], [headTrace, "head"]]) {
      const labels = tokenLabels(trace.tokens);
      const common = { rows: labels, cols: labels, rowTitle: "step that attends", colTitle: "step attended to" };
      plots.push(drawHeatmap($(`plot-${prefix}-masked`), { ...common, z: trace.heads[0].masked_scores, kind: "signed", filename: `lesson-${prefix}-masked` }));
      plots.push(drawHeatmap($(`plot-${prefix}-weights`), { ...common, z: trace.heads[0].attn_weights, kind: "weights", filename: `lesson-${prefix}-weights` }));
    }
    await Promise.all(plots);
  } catch (err) {
    showFieldErrors(root, err, () => ({ key: "general" }));
  }
}

function boot() {
  $("dim-slider").max = String(MAX_POWER);
  const url = readLessonState();
  if (url.dim !== null) $("dim-slider").value = url.dim;
  if (url.scale !== null) $("scale-slider").value = url.scale;
  if (url.scores !== null) $("scores-input").value = url.scores;
  clearFieldErrors(root);
  const onDim = debounce(() => {
    save();
    updateVariance();
  });
  const onSharp = debounce(() => {
    save();
    updateSharpness();
  });
  $("dim-slider").addEventListener("input", () => {
    $("dim-value").textContent = String(dimOf($("dim-slider").value));
    onDim();
  });
  $("scale-slider").addEventListener("input", () => {
    $("scale-value").textContent = $("scale-slider").value;
    onSharp();
  });
  $("scores-input").addEventListener("change", onSharp);
  $("scores-input").addEventListener("input", onSharp);
  Promise.all([updateVariance(), updateSharpness(), drawCausal()]).then(() => {
    root.dataset.ready = "1";
  });
}

boot();
