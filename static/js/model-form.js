// /model's form: the model picker, the text(s) or the prompt and generation settings,
// and the map options; the form <-> the page's state, and the controls each model
// takes (a pair for encoders, generation for decoders).

import { countOf } from "./labels.js";
import { hasNoLayers, isPlainEncoder } from "./model-page.js";
import { ENCODER_DECODER } from "./model-state.js";

/** The URL's model when it can be shown; else the default, and a note for the picker. */
export function checkUrlModel(page) {
  const { state, models, defaultModel } = page;
  if (!state.model) return;
  const asked = state.model;
  const entry = models.find((m) => m.name === asked);
  if (entry && entry.supported) {
    if (asked === defaultModel) state.model = null;
    return;
  }
  state.model = null;
  page.view.modelNote = entry
    ? `“${asked}” cannot be shown: ${entry.reason}. Showing ${defaultModel} instead.`
    : `There is no model called “${asked}” on this server; showing ${defaultModel} instead. Choose one from the list.`;
}

/** Say why a model without layers shows no maps (and hide the empty map cards). */
function explainNoAttention({ $ }, entry) {
  const none = hasNoLayers(entry);
  const note = $("no-attention");
  note.hidden = !none;
  note.textContent = none
    ? `${entry.name} has no attention layers (0 layers, as a trained bigram: no token reads another), so there is no attention to show. It still writes text after a prompt.`
    : "";
  $("model-layout").hidden = none;
  $("token-view").hidden = none;
  $("tokens-help").hidden = none; // "choose a token to see what it reads": nothing to read
  $("model-form").querySelector("input[name='task'][value='read']").disabled = none;
}

/** What bounds Max new tokens for this model: the server's limit, or the model's context. */
function newTokensHelp(limits, entry) {
  const server = limits.max_new_tokens;
  const room = entry.max_positions ? entry.max_positions - 1 : null; // a prompt is at least 1 token
  if (room !== null && (!server || room < server)) {
    return `at most ${room.toLocaleString("en")}: this model reads ${countOf(entry.max_positions, "token")}, prompt included`;
  }
  return `at most ${server.toLocaleString("en")} on this server`;
}

/** The model's name, facts and limits beside the picker. */
function showEntry({ $, limits }, entry) {
  $("tokens-kind").textContent = entry && entry.family === "bert" ? "WordPiece tokens" : "Tokens";
  if (!entry) return;
  $("model-pick").value = entry.name;
  $("model-name").textContent = entry.name;
  $("model-facts").textContent = entry.about;
  $("gen-max-help").textContent = newTokensHelp(limits, entry);
}

/** Show the controls the chosen model takes (a pair for encoders, generation for decoders). */
export function applyKind(page) {
  const { $, state } = page;
  const entry = page.current();
  const causal = Boolean(entry && entry.causal);
  const pairs = isPlainEncoder(entry); // an encoder-decoder's second text is its target (model-stacks.js)
  if (!causal) state.task = "read";
  if (hasNoLayers(entry)) state.task = "generate";
  explainNoAttention(page, entry);
  const generating = state.task === "generate";
  $("task").hidden = !causal;
  for (const radio of $("model-form").querySelectorAll("input[name='task']")) radio.checked = radio.value === state.task;
  $("text-field").hidden = generating;
  $("text-b-field").hidden = !pairs;
  $("generate-fields").hidden = !generating;
  $("model-run").textContent = generating ? "Generate" : "Show attention";
  $("masked-hint").hidden = !causal;
  $("compare-word-card").hidden = !pairs;
  // Value-weighted maps are a one-stack model's (an encoder-decoder answers 422 for them).
  const seq2seq = Boolean(entry && entry.kind === ENCODER_DECODER);
  if (seq2seq) state.measure = "weights";
  $("map-measure").value = state.measure;
  $("map-measure").disabled = seq2seq;
  $("two-texts").hidden = seq2seq; // its one head's map is a one-stack model's (the stacks card is this one's)
  showEntry(page, entry);
  const sampled = state.sampling === "sample";
  for (const id of ["gen-temperature", "gen-top-k", "gen-seed"]) $(id).disabled = !sampled;
}

const numberOrNull = (raw) => (raw.trim() === "" ? null : Number(raw));

export function readForm({ $, state }) {
  state.text = $("model-text").value;
  state.textB = $("model-text-b").value.trim() ? $("model-text-b").value : "";
  state.prompt = $("gen-prompt").value;
  state.maxNew = numberOrNull($("gen-max").value);
  state.sampling = $("gen-sampling").value;
  state.temperature = numberOrNull($("gen-temperature").value);
  state.topK = numberOrNull($("gen-top-k").value);
  state.seed = numberOrNull($("gen-seed").value);
}

export function fillForm({ $, state }) {
  const values = {
    "model-text": state.text,
    "model-text-b": state.textB,
    "gen-prompt": state.prompt,
    "gen-max": state.maxNew ?? "",
    "gen-sampling": state.sampling,
    "gen-temperature": state.temperature ?? "",
    "gen-top-k": state.topK ?? "",
    "gen-seed": state.seed ?? "",
    "colour-scale": state.scale,
    "map-measure": state.measure,
    "cw-text-a": state.cw.text_a || "",
    "cw-text-b": state.cw.text_b || "",
    "cw-word": state.cw.word || "",
  };
  for (const [id, value] of Object.entries(values)) $(id).value = value;
  $("hide-special").checked = state.hide;
  $("sink-apart").checked = state.sinkApart;
}

/** The form's events: run (submit, Enter), a new model, task, sampling and map options. */
export function bindForm(page, { run, redraw, stacks }) {
  const { $, state } = page;
  const form = $("model-form");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    readForm(page);
    run();
  });
  // Enter runs, Shift+Enter makes a new line.
  for (const id of ["model-text", "model-text-b", "gen-prompt"]) {
    $(id).addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        form.requestSubmit();
      }
    });
  }
  $("model-pick").addEventListener("change", (ev) => pickModel(page, ev.target.value, { run, stacks }));
  for (const radio of form.querySelectorAll("input[name='task']")) {
    radio.addEventListener("change", () => {
      readForm(page);
      state.task = radio.value;
      state.token = null;
      state.tokens = [];
      applyKind(page);
      run();
    });
  }
  bindOptions(page, redraw);
}

/** A new model: texts left as the last model's defaults become this one's (a run's probe). */
function pickModel(page, name, { run, stacks }) {
  const { state } = page;
  readForm(page);
  const before = page.defaultsFor(page.current());
  state.model = name === page.defaultModel ? null : name;
  const after = page.defaultsFor(page.current());
  if (state.text === before.text) state.text = after.text;
  if (state.prompt === before.prompt) state.prompt = after.prompt;
  fillForm(page);
  state.token = null;
  state.tokens = [];
  state.tokenLayer = null;
  applyKind(page);
  run();
  stacks.update();
}

/** Sampling, special tokens, the measure (each runs again) and the colours (drawn again). */
function bindOptions(page, redraw) {
  const { $, state } = page;
  const form = $("model-form");
  $("gen-sampling").addEventListener("change", (ev) => {
    state.sampling = ev.target.value;
    applyKind(page);
  });
  $("hide-special").addEventListener("change", (ev) => {
    state.hide = ev.target.checked;
    form.requestSubmit();
  });
  $("map-measure").addEventListener("change", (ev) => {
    state.measure = ev.target.value;
    form.requestSubmit();
  });
  const recolour = (change) => (ev) => {
    change(ev.target);
    page.writeUrl();
    if (page.view.meta) redraw();
  };
  $("colour-scale").addEventListener("change", recolour((t) => (state.scale = t.value)));
  $("sink-apart").addEventListener("change", recolour((t) => (state.sinkApart = t.checked)));
}
