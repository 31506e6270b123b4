// /model's run: the form's text (or prompt) through the model, every layer's maps as
// they arrive (model-data.js' worker), then the large map, the token view and the
// analysis cards, each in a task of its own.  A newer run makes older answers stale
// (page.view.seq).  Errors go beside the control they name, in plain words.

import { countOf } from "./labels.js";
import { fetchLayers, generateLayers } from "./model-data.js";
import { clearFieldErrors, markStale, showFieldError, showFieldErrors } from "./feedback.js";
import { generationProblems, modelErrorPlace, plainModelError } from "./model-errors.js";
import { isPooled } from "./model-overview.js";
import { isPlainEncoder } from "./model-page.js";
import { ENCODER_DECODER } from "./model-state.js";
import { EXTRA_MAPS } from "./model-state.js";
import { tokenRows } from "./model-token-rows.js";
import { explainUnknown } from "./model-tokens.js";

/** A promise that settles in a later task (the browser may paint and handle input first). */
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

const stale = ({ $ }, reason) => markStale($("model-results"), $("stale-note"), reason);
const setStatus = ({ $ }, text) => ($("model-status").textContent = text);

/** Whether the form can be sent (else its problems are shown beside their controls). */
function ready(page) {
  const { $, state, view } = page;
  const form = $("model-form");
  clearFieldErrors(form);
  if (view.modelNote) {
    showFieldError(form, "model", view.modelNote);
    view.modelNote = null;
  }
  if (!page.current()) {
    showFieldError(form, "model", "This server has no model it can show.");
    return false;
  }
  const problems = state.task === "generate" ? generationProblems(state, page.limits) : [];
  for (const [field, text] of problems) showFieldError(form, field, text);
  if (!problems.length) return true;
  if (view.meta) stale(page, problems.map(([, text]) => text).join(" "));
  setStatus(page, "");
  page.cards.progress.stop();
  return false;
}

/** The first answer (its maps aside): what is shown changes to it. */
function onMeta(page, run, info, body) {
  const { state, view, cards } = page;
  performance.mark("model-first-layer");
  Object.assign(view, { info, meta: body, overview: isPooled(body), layers: run.fresh });
  const { textB } = run.asked;
  view.mapRequest = run.generating ? null : { ...(state.model ? { model: state.model } : {}), text: state.text, ...(textB ? { text_b: textB } : {}), hide_special: state.hide, measure: state.measure };
  view.rowSource = view.mapRequest && tokenRows(view.mapRequest);
  cards.maps.prepare(info, body);
  if (state.layer > info.layers) state.layer = 1;
  if (/^\d+$/.test(state.head) && Number(state.head) > info.heads) state.head = "1";
  if (state.tokenLayer !== null && state.tokenLayer > info.layers) state.tokenLayer = null;
  if (state.token !== null && state.token >= body.tokens.length) state.token = null;
  state.tokens = state.tokens.filter((t) => t < body.tokens.length);
  cards.maps.pending();
  cards.tokens.render();
}

/** The worker's callbacks for one run. */
function callbacks(page, run) {
  let info = null;
  return {
    isCurrent: () => run.mine === page.view.seq,
    onProgress: (event) => page.cards.progress.update(event),
    onInfo: (answer) => (info = answer),
    onMeta: (body) => onMeta(page, run, info, body),
    onLayer: (n, data) => {
      run.fresh.set(n, data);
      page.cards.maps.drawRow(n);
      run.drawn += page.view.info.heads + EXTRA_MAPS.length;
    },
  };
}

/** Ask for every layer (a generation, or a text's maps). */
function fetchAll(page, run) {
  const { state } = page;
  const calls = callbacks(page, run);
  if (!run.generating) return fetchLayers({ model: state.model, text: state.text, textB: run.asked.textB || null, hideSpecial: state.hide, measure: state.measure, ...calls });
  const sampled = state.sampling === "sample";
  const options = { temperature: sampled ? state.temperature : 0, topK: sampled ? state.topK : null, seed: sampled ? state.seed : null };
  return generateLayers({ model: state.model, prompt: state.prompt, maxNew: state.maxNew, hideSpecial: state.hide, ...options, ...calls });
}

/** Head scores, ablation, the lens and attribution for the text shown, at any length: a
 * limit the server has (attribution's full maps, say) comes back as its error, shown in
 * the card that asked.  A generation and a sentence pair are not offered them. */
function showAnalysis(page, run) {
  const { state, view, cards } = page;
  const { info, meta } = view;
  cards.why.clear();
  if (run.generating || run.asked.textB) {
    cards.analysis.clear();
    cards.attribution.clear();
    view.explained = null;
    return;
  }
  // Encoder-decoders: a stack and a target, the stacks card's (model-encdec.js).
  const pick = page.current() && page.current().kind === ENCODER_DECODER ? () => cards.stacks.choice() : null;
  const text = run.asked.text;
  cards.analysis.show({ model: state.model, text, causal: info.causal, layers: info.layers, heads: info.heads, pick });
  cards.attribution.show({ model: state.model, text, causal: info.causal, tokens: meta.tokens, pick });
  view.explained = { model: state.model, text, causal: info.causal, tokens: meta.tokens, pick };
}

/** What the run answered, in the status line; words the tokenizer did not know. */
function summarize(page, run) {
  const { info, meta } = page.view;
  const what = run.generating ? `${meta.generated_tokens.length} written, ` : "";
  const sizes = info.layers ? `${countOf(info.layers, "layer")} × ${countOf(info.heads, "head")}` : "no attention layers";
  setStatus(page, `${meta.tokens.length} tokens (${what}${sizes}) in ${Math.round(performance.now() - run.started)} ms`);
  explainUnknown(page.$("unk-note"), {
    tokens: meta.tokens,
    texts: run.generating ? [run.asked.prompt] : [run.asked.text, run.asked.textB],
    model: info.name,
    modelName: info.name.split("/").pop(),
    limits: page.limits,
    isCurrent: () => run.mine === page.view.seq,
    lookup: isPlainEncoder(page.current()), // /api/model/embeddings lists an encoder's word pieces
  });
}

/** Every layer arrived: the large map, the token view and the analysis cards, each in a
 * task of its own, so the page answers input between them. */
async function finish(page, run) {
  const { $, state, view, cards } = page;
  cards.progress.stop();
  view.shown = run.asked;
  if (run.generating && state.sampling === "sample" && state.seed === null) {
    // The seed the server drew: kept in the form and the link, so a reload writes the same.
    state.seed = view.meta.seed;
    $("gen-seed").value = String(view.meta.seed);
    page.writeUrl();
  }
  performance.mark("model-grid-drawn");
  stale(page, null);
  const current = () => run.mine === view.seq;
  await nextTask();
  if (!current()) return;
  cards.zoom.draw();
  await nextTask();
  if (!current()) return;
  cards.tokens.draw();
  await nextTask();
  if (!current()) return;
  showAnalysis(page, run);
  summarize(page, run);
  // Last: a drawn grid says the cards below were reset for these maps, so what they show
  // (or are asked for) from then on is this input's, never the last one's.
  $("head-grid").dataset.drawn = String(run.drawn);
  $("head-grid").dataset.tokens = String(view.meta.tokens.length);
}

/** Run the model on the form's input (see above). */
export async function runModel(page) {
  const { $, state, view, cards } = page;
  const run = { mine: ++view.seq, generating: state.task === "generate", fresh: new Map(), drawn: 0, started: performance.now() };
  if (!ready(page)) return;
  setStatus(page, run.generating ? "The model is writing…" : "Running the model…");
  stale(page, null); // a new run: the last one's "Out of date" no longer applies
  cards.progress.start();
  $("head-grid").dataset.drawn = "0";
  page.writeUrl();
  run.asked = { task: state.task, text: state.text, textB: isPlainEncoder(page.current()) ? state.textB : "", prompt: state.prompt };
  try {
    await fetchAll(page, run);
    if (run.mine !== view.seq) return;
    await finish(page, run);
  } catch (err) {
    if (run.mine !== view.seq) return;
    cards.progress.stop();
    const messages = showFieldErrors($("model-form"), plainModelError(err), modelErrorPlace);
    if (view.meta) stale(page, messages.join(" "));
    setStatus(page, view.meta ? "The maps below are still those of the last input that could be computed." : "");
  }
}
