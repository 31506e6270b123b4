// Encoder-decoders on /model (T5, BART, Marian): the encoder's, the decoder's and the
// cross-attention's maps as tabs, each layer × head as a thumbnail and one map large,
// and the alignment view: choose a written target word, see which source words it read
// in every layer and head (drawn by model-stacks-draw.js).  The source is the page
// form's text; the target is typed here or written by the model (POST
// /api/model/generate).  Special tokens are always shown, so row i of the decoder and
// cross maps is target token i (the start token first).  The card's state (target,
// tab, layer, head, word) lives in the URL's hash, so a view can be shared and
// reloaded; the query is model.js'.

import { ApiError, post } from "./api.js";
import { byTestId } from "./dom.js";
import { clearFieldErrors, showFieldErrors } from "./feedback.js";
import { decodeCompact } from "./model-data.js";
import { ENCODER_DECODER, URL_LIMIT, realHeadLink } from "./model-state.js";
import { drawAlignment, drawGrid, drawLarge } from "./model-stacks-draw.js";
import { STACK_CHOSEN } from "./model-encdec.js";

const STACKS = ["encoder", "decoder", "cross"];
const AXES = {
  encoder: "Encoder self-attention: rows and columns are source tokens.",
  decoder: "Decoder self-attention: rows and columns are target tokens (the start token first); grey cells are masked, a target token cannot read the ones after it.",
  cross: "Cross-attention: rows are target tokens (the start token first), columns are source tokens: what each target position read of the source.",
};
const GEN_TOKENS = 40;

/** The view a link's hash names, or null. */
function readHash() {
  const p = new URLSearchParams(window.location.hash.slice(1));
  if (!p.has("stack") && !p.has("target")) return null;
  const whole = (v) => (/^\d+$/.test(v || "") ? Number(v) : null);
  return {
    target: p.get("target") || "",
    stack: STACKS.includes(p.get("stack")) ? p.get("stack") : "encoder",
    layer: whole(p.get("layer")) || 1,
    head: p.get("head") === "mean" ? "mean" : whole(p.get("head")) || 1,
    word: whole(p.get("word")),
    when: p.get("when") === "input" ? "input" : "written",
  };
}

function writeHash({ $, view, data }) {
  const p = new URLSearchParams();
  if (data) {
    p.set("target", $("s2s-target").value);
    p.set("stack", view.stack);
    p.set("layer", String(view.layer));
    p.set("head", String(view.head));
    if (view.word !== null) p.set("word", String(view.word));
    if (view.when !== "written") p.set("when", view.when);
  }
  const { pathname, search, hash } = window.location;
  const url = `${pathname}${search}${data ? `#${p}` : ""}`;
  if (url !== `${pathname}${search}${hash}`) window.history.replaceState(null, "", url);
}

/** The card's data from an answer (the target written, or the one typed). */
function dataOf(answer, { text, target, writing }) {
  return {
    model: answer.model,
    text, // the source and target these maps are of (for the link to a head's steps)
    targetText: writing ? answer.generated_text : target,
    targetIds: writing ? answer.generated_ids : null, // the written target's rows, as ids
    written: writing,
    source: answer.source_tokens,
    target: answer.target_tokens,
    layers: answer.layers.length,
    heads: answer.heads,
    maps: {
      encoder: answer.encoder_attentions.map(decodeCompact),
      decoder: answer.decoder_attentions.map(decodeCompact),
      cross: answer.cross_attentions.map(decodeCompact),
    },
  };
}

/** Ask for the maps: the typed target's, or a target the model writes first. */
async function ask(c, { text, target, writing }) {
  const base = { format: "compact", dtype: "uint8", ...(c.modelName() ? { model: c.modelName() } : {}) };
  const answer = writing
    ? await post("/api/model/generate", { ...base, prompt: text, max_new_tokens: Math.min(GEN_TOKENS, c.limits.max_new_tokens || GEN_TOKENS) })
    : await post("/api/model/attention", { ...base, text, target });
  if (!answer.cross_attentions) throw new ApiError(422, [{ loc: ["model"], msg: `${answer.model} is not an encoder-decoder` }]);
  return answer;
}

async function run(c, write) {
  const { $, view } = c;
  const mine = ++c.seq;
  clearFieldErrors(c.form);
  const text = c.sourceText();
  const target = $("s2s-target").value;
  // A target the model wrote for another source is that source's: drop it and say so.
  const dropped = Boolean(!write && c.data && c.data.written && text !== c.data.text && target === c.data.targetText);
  const writing = write || dropped || !target.trim();
  $("s2s-status").textContent = writing ? "The model is writing the target…" : "Running the model…";
  c.card.dataset.ready = "false";
  try {
    const answer = await ask(c, { text, target, writing });
    if (mine !== c.seq) return;
    const data = (c.data = dataOf(answer, { text, target, writing }));
    if (writing) $("s2s-target").value = answer.generated_text;
    view.layer = Math.min(view.layer, data.layers);
    if (view.head !== "mean") view.head = Math.min(view.head, data.heads);
    if (view.word !== null && view.word >= data.target.length) view.word = null;
    const what = writing ? `${answer.generated_ids.length} tokens written, ` : "";
    const why = dropped ? "The source changed, so the target the model had written for the last one was dropped and a new one written. " : "";
    $("s2s-status").textContent = `${why}${data.source.length} source and ${data.target.length} target tokens (${what}${data.layers} layers × ${data.heads} heads)`;
    render(c);
    c.card.dataset.ready = "true";
  } catch (err) {
    if (mine !== c.seq) return;
    showFieldErrors(c.form, err, (path) => (path[0] === "target" ? { key: "target", label: "The target" } : { key: "general" }));
    $("s2s-status").textContent = "";
  }
}

/** The link from the large map's head to its steps in the explorer (or why there is none). */
function updateOpenHead({ $, view, data }) {
  const { stack, layer, head } = view;
  const link = $("s2s-open-head");
  const note = $("s2s-open-head-note");
  const target = realHeadLink({ model: data.model, text: data.text, target: data.targetText, targetIds: data.targetIds, stack, layer, head });
  link.hidden = head === "mean" || !target.fits;
  note.hidden = head === "mean" || target.fits;
  if (!link.hidden) {
    link.href = target.href;
    link.textContent = `Layer ${layer}, head ${head} step by step →`;
  }
  note.textContent = target.fits
    ? ""
    : `These texts are too long for a link to this head's steps (${target.length.toLocaleString("en-US")} characters; links stay under ${URL_LIMIT.toLocaleString("en-US")}).`;
}

function alignment(c) {
  drawAlignment(c, (word) => {
    c.view.word = word;
    alignment(c);
    writeHash(c);
  });
}

function render(c) {
  const { $, view, data, card } = c;
  view.layer = Math.min(view.layer, data.maps[view.stack].length); // stacks may differ in depth
  for (const tab of card.querySelectorAll("[role='tab']")) {
    const on = tab.dataset.stack === view.stack;
    tab.setAttribute("aria-selected", on ? "true" : "false");
    tab.tabIndex = on ? 0 : -1;
  }
  $("s2s-panel").setAttribute("aria-labelledby", `s2s-tab-${view.stack}`);
  $("s2s-panel").dataset.stack = view.stack;
  $("s2s-axes").textContent = AXES[view.stack];
  drawGrid(c, (layer, head) => {
    Object.assign(view, { layer, head });
    render(c);
  });
  drawLarge(c);
  updateOpenHead(c);
  const align = $("s2s-align");
  align.hidden = view.stack !== "cross";
  if (!align.hidden) alignment(c);
  writeHash(c);
  card.dispatchEvent(new CustomEvent(STACK_CHOSEN, { bubbles: true })); // the ablation card sizes its grid again
}

/** The tabs (click, arrow keys), "when" of the alignment, the card's and the page's form. */
function bind(c, pageForm) {
  const { card, view } = c;
  const show = (stack) => {
    view.stack = stack;
    if (c.data) render(c);
  };
  for (const tab of card.querySelectorAll("[role='tab']")) {
    tab.addEventListener("click", () => show(tab.dataset.stack));
    tab.addEventListener("keydown", (ev) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
      if (!step) return;
      ev.preventDefault();
      show(STACKS[(STACKS.indexOf(view.stack) + step + STACKS.length) % STACKS.length]);
      card.querySelector(`[data-stack='${view.stack}']`).focus();
    });
  }
  for (const radio of card.querySelectorAll("input[name='s2s-when']")) {
    radio.addEventListener("change", () => {
      view.when = radio.value;
      if (c.data) alignment(c);
      writeHash(c);
    });
  }
  c.form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(c, false);
  });
  c.$("s2s-write").addEventListener("click", () => run(c, true));
  pageForm.addEventListener("submit", () => {
    if (c.isEncoderDecoder()) run(c, false);
  });
}

/** Show or hide the card for the chosen model, and fill it (the first time, as the link's hash says). */
function update(c) {
  const on = c.isEncoderDecoder();
  c.card.hidden = !on;
  const asked = c.fromUrl;
  c.fromUrl = null;
  if (!on) {
    c.seq++;
    c.data = null;
    writeHash(c);
    return;
  }
  if (asked && asked.target.trim()) {
    Object.assign(c.view, { stack: asked.stack, layer: asked.layer, head: asked.head, word: asked.word, when: asked.when });
    for (const radio of c.card.querySelectorAll("input[name='s2s-when']")) radio.checked = radio.value === c.view.when;
    c.$("s2s-target").value = asked.target;
    run(c, false);
    return;
  }
  c.$("s2s-target").value = "";
  run(c, true);
}

/**
 * Wire the encoder-decoder card.  models: GET /api/models' list; sourceText(): the
 * page's text; modelName(): the chosen model's name (null: the default); form: the
 * page's form (its submit runs the card too).  Returns {update()}.
 */
export function initStacks({ models, defaultModel, limits, form, sourceText, modelName }) {
  const card = byTestId("stacks-card");
  if (!card) return { update: () => {} };
  const $ = (id) => byTestId(id, card);
  const isEncoderDecoder = () => {
    const entry = models.find((m) => m.name === (modelName() || defaultModel));
    return Boolean(entry && entry.kind === ENCODER_DECODER);
  };
  // data: {source, target, written, layers, heads, maps: {stack: [decoded per layer]}};
  // fromUrl: the first update() reads the view the link names.
  const view = { stack: "encoder", layer: 1, head: 1, word: null, when: "written" };
  const c = { card, $, form: $("stacks-form"), grid: $("s2s-grid"), view, data: null, seq: 0, fromUrl: readHash(), limits, sourceText, modelName, isEncoderDecoder };
  bind(c, form);
  return { update: () => update(c), choice: () => choice(c), onCell: (explain) => onCell(c, explain), open: (...at) => open(c, ...at) };
}

/** Show one stack's head large (a head the analysis cards name), in sight. */
function open(c, stack, layer, head) {
  Object.assign(c.view, { stack, layer, head });
  if (c.data) render(c);
  c.$("s2s-panel").scrollIntoView({ block: "nearest" });
}

/** The stack and target the analysis cards read (model-encdec.js): the tab chosen and the
 * target these maps are of (null until a target is read or written). */
function choice({ view, data }) {
  const maps = data ? data.maps[view.stack] : null; // the stack's own depth and heads (they may differ)
  const sizes = maps && maps.length ? { layers: maps.length, heads: maps[0].shape[0] } : {};
  return { stack: view.stack, target: data ? data.targetText : null, text: data ? data.text : null, ...sizes };
}

/** A click on a cell of the large map: explain({stack, layer, head, row, col, rows, cols}). */
function onCell(c, explain) {
  c.$("s2s-map").addEventListener("click", (ev) => {
    const td = ev.target instanceof Element ? ev.target.closest("td") : null;
    if (!td || !c.data || c.view.head === "mean" || td.classList.contains("masked")) return;
    const row = td.parentElement.rowIndex - 1; // the header row first
    const col = td.cellIndex - 1; // the row's label first
    const { layer, head } = c.view;
    explain({ ...choice(c), layer, head, row, col });
  });
}
