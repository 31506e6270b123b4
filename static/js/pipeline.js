// The pipeline: one labelled heatmap per step of the trace, for one head or
// the heads' average.

import { el } from "./dom.js";
import { drawHeatmap } from "./heatmap.js";
import { dimLabels, tokenLabels } from "./labels.js";

export const STEPS = [
  { key: "x", title: "x", text: "Each token's input embedding, one row per token.", rows: "q", cols: "dim", shared: true },
  { key: "q", title: "q = x @ W_query", text: "Queries: what each token is looking for.", rows: "q", cols: "dim" },
  { key: "k", title: "k = x @ W_key", text: "Keys: what each token offers to be matched against.", rows: "k", cols: "dim" },
  { key: "v", title: "v = x @ W_value", text: "Values: what each token passes on when attended to.", rows: "k", cols: "dim" },
  { key: "attn_scores", title: "attn_scores = q @ k.T", text: "How well each token's query (row) matches each token's key (column).", rows: "q", cols: "k" },
  { key: "scaled_scores", title: "scaled_scores", text: "The scores times the scale (1/sqrt(d_k) by default), so they do not grow with the width.", rows: "q", cols: "k" },
  { key: "masked_scores", title: "masked_scores", text: "With the causal mask, a token may not look ahead: those cells become −∞ (blank).", rows: "q", cols: "k" },
  { key: "attn_weights", title: "attn_weights = softmax(masked_scores)", text: "Each row turned into weights that sum to 1: how much each token (row) takes from each token (column).", rows: "q", cols: "k", weights: true },
  { key: "context_vec", title: "context_vec = attn_weights @ v", text: "Each token's new vector: the weighted average of the values.", rows: "q", cols: "dim" },
  { key: "output", title: "output", text: "The heads' context vectors joined side by side (times W_out when given).", rows: "q", cols: "dim", shared: true },
];

function average(matrices) {
  const [first] = matrices;
  return first.map((row, i) =>
    row.map((_, j) => {
      let sum = 0;
      for (const m of matrices) {
        if (m[i][j] === null) return null;
        sum += m[i][j];
      }
      return sum / matrices.length;
    }),
  );
}

/** The matrix a step shows for the chosen view ("0", "1", … or "avg"). */
export function stepMatrix(trace, key, view) {
  const step = STEPS.find((s) => s.key === key);
  if (step.shared) return trace[key];
  const per = trace.heads.map((h) => h[key]);
  if (per.some((m) => !m)) return null;
  if (view === "avg") return average(per);
  return per[Math.min(Number(view) || 0, per.length - 1)];
}

const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

/**
 * Build (once) the panels, then draw every step (newPlot the first time,
 * Plotly.react after), one per frame so the first appears at once. A newer
 * call supersedes an older one still drawing.
 */
export async function drawPipeline(container, trace, view) {
  const generation = String(Number(container.dataset.generation || 0) + 1);
  container.dataset.generation = generation;
  if (!container.dataset.built) {
    container.dataset.built = "1";
    for (const step of STEPS) {
      container.append(
        el("figure", { class: "panel", "data-step": step.key }, [
          el("figcaption", {}, [el("strong", { class: "step-title", text: step.title }), el("span", { class: "step-text", text: ` ${step.text}` })]),
          el("div", { class: "plot", "data-testid": `plot-${step.key}`, role: "img", "aria-label": `${step.title} heatmap` }),
          el("p", { class: "hint empty-note", hidden: true }),
        ]),
      );
    }
  }
  const qLabels = tokenLabels(trace.tokens);
  const kLabels = tokenLabels(trace.source_tokens);
  for (const step of STEPS) {
    if (container.dataset.generation !== generation) return false;
    const panel = container.querySelector(`[data-step="${step.key}"]`);
    const plot = panel.querySelector(".plot");
    const note = panel.querySelector(".empty-note");
    const z = stepMatrix(trace, step.key, view);
    const empty = !z || z.length === 0 || z[0].length === 0;
    plot.hidden = empty;
    note.hidden = !empty;
    if (empty) {
      note.textContent = trace.mode === "causal_average" && ["q", "k"].includes(step.key)
        ? "Not used: causal averaging has no queries or keys, every past step counts the same."
        : "Not computed for this example.";
      continue;
    }
    const rows = step.rows === "q" ? qLabels : kLabels;
    const cols = step.cols === "k" ? kLabels : dimLabels(z[0].length);
    await drawHeatmap(plot, {
        z,
        rows,
        cols,
        kind: step.weights ? "weights" : "signed",
        rowTitle: step.rows === "q" ? "attends (query)" : "attended to (key)",
        colTitle: step.cols === "k" ? "attended to (key)" : "dimension",
        filename: `attention-${step.key}`,
        uirevision: `${qLabels.join("|")}/${kLabels.join("|")}`,
    });
    await nextFrame();
  }
  return container.dataset.generation === generation;
}
