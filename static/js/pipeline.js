// The pipeline: one labelled heatmap per step of the trace, for one head or
// the heads' average. explorer.html holds the panels (so their space is there
// before any data); STEPS (the server's, app/steps.py) says what each one shows.

import { el, initialData } from "./dom.js";
import { drawHeatmap, plotInView, plotWidth } from "./heatmap.js";
import { yieldToMain } from "./plotly-loader.js";
import { dimLabels, tokenLabels } from "./labels.js";

// The steps, their titles and words: the server's list (app/steps.py), in the page's data.
export const STEPS = initialData().steps || [];

/** The cell-by-cell mean of equally shaped matrices (a cell masked, null, in any of them: null). */
export function average(matrices) {
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

/** The panel of one step: the page's own (explorer.html) or, where there is none, a new one. */
function panelFor(container, step) {
  let panel = container.querySelector(`[data-step="${step.key}"]`);
  if (!panel) {
    panel = el("figure", { class: "panel", "data-step": step.key }, [
      el("figcaption", {}, [el("strong", { class: "step-title", text: step.title }), el("span", { class: "step-text", text: ` ${step.text}` })]),
      el("div", { class: "plot", "data-testid": `plot-${step.key}`, role: "img", "aria-label": `${step.title} heatmap` }),
      el("p", { class: "hint empty-note", hidden: true }),
    ]);
    container.append(panel);
  }
  return panel;
}

/**
 * Title the panels for self- or cross-attention: with a source, the keys and values
 * are the source's (k = source @ W_key) and there is no causal mask.
 */
export function captionPipeline(container, cross) {
  for (const step of STEPS) {
    const panel = container.querySelector(`[data-step="${step.key}"]`);
    if (!panel) continue;
    const title = (cross && step.cross_title) || step.title;
    panel.querySelector(".step-title").textContent = title;
    panel.querySelector(".step-text").textContent = ` ${(cross && step.cross_text) || step.text}`;
    panel.querySelector(".plot").setAttribute("aria-label", `${title} heatmap`);
  }
}

/** Why a step has no matrix. */
function emptyNote(trace, step) {
  return trace.mode === "causal_average" && ["q", "k"].includes(step.key)
    ? "Not used: causal averaging has no queries or keys, every past step counts the same."
    : "Not computed for this example.";
}

/** One step's matrix z, its rows and columns labelled by tokens or dimensions. */
function drawStep(plot, step, z, width, qLabels, kLabels) {
  return drawHeatmap(plot, {
    z,
    rows: step.rows === "q" ? qLabels : kLabels,
    cols: step.cols === "k" ? kLabels : dimLabels(z[0].length),
    kind: step.weights ? "weights" : "signed",
    rowTitle: step.rows === "q" ? "attends (query)" : "attended to (key)",
    colTitle: step.cols === "k" ? "attended to (key)" : "dimension",
    thinCols: step.cols === "dim",
    width: width || undefined,
    filename: `attention-${step.key}`,
    uirevision: `${qLabels.join("|")}/${kLabels.join("|")}`,
  });
}

/**
 * Draw every step of the trace for one view ("0", "1", … or "avg"). Widths are
 * read once, before anything is written; the plots in view are drawn first, each
 * in its own task; a plot whose inputs did not change is left as it is
 * (drawHeatmap). A newer call supersedes an older one still drawing. Resolves to
 * true when this call drew everything.
 */
export async function drawPipeline(container, trace, view) {
  const generation = String(Number(container.dataset.generation || 0) + 1);
  container.dataset.generation = generation;
  const qLabels = tokenLabels(trace.tokens);
  const kLabels = tokenLabels(trace.source_tokens);
  const jobs = STEPS.map((step) => {
    const panel = panelFor(container, step);
    return { step, panel, plot: panel.querySelector(".plot"), note: panel.querySelector(".empty-note"), z: stepMatrix(trace, step.key, view) };
  });
  // Widths and visibility come from observers (heatmap.js): no forced layout here.
  for (const job of jobs) job.width = job.plot.hidden ? 0 : plotWidth(job.plot);
  jobs.sort((a, b) => Number(plotInView(b.plot)) - Number(plotInView(a.plot))); // in view first, else in order
  let first = true;
  for (const { step, plot, note, z, width } of jobs) {
    // One plot per task (the one in view first): a quick draw is a few ms, a
    // Plotly.react 15-40 ms; together they would block input for a while.
    if (!first) await yieldToMain();
    first = false;
    if (container.dataset.generation !== generation) return false;
    const empty = !z || z.length === 0 || z[0].length === 0;
    plot.hidden = empty;
    note.hidden = !empty;
    if (empty) {
      note.textContent = emptyNote(trace, step);
      continue;
    }
    await drawStep(plot, step, z, width, qLabels, kLabels);
  }
  return container.dataset.generation === generation;
}
