// Encoder-decoders on /model (T5, BART, Marian): the encoder's, the decoder's and the
// cross-attention's maps as tabs, each layer × head as a thumbnail and one map large,
// and the alignment view: choose a written target word, see which source words it read
// in every layer and head.  The source is the page form's text; the target is typed here
// or written by the model (POST /api/model/generate).  Special tokens are always shown,
// so row i of the decoder and cross maps is target token i (the start token first).
// The card's state (target, tab, layer, head, word) lives in the URL's hash, so a view
// can be shared and reloaded; the query is model.js'.

import { ApiError, post } from "./api.js";
import { colourBar, setColourBar } from "./colour-bar.js";
import { byTestId, el } from "./dom.js";
import { clearFieldErrors, showFieldErrors } from "./feedback.js";
import { tokenLabels } from "./labels.js";
import { css, drawCells, mapMax, rgbAt } from "./colour.js";
import { decodeCompact } from "./model-data.js";
import { ENCODER_DECODER, URL_LIMIT, realHeadLink } from "./model-state.js";

const STACKS = ["encoder", "decoder", "cross"];
const AXES = {
  encoder: "Encoder self-attention: rows and columns are source tokens.",
  decoder: "Decoder self-attention: rows and columns are target tokens (the start token first); grey cells are masked, a target token cannot read the ones after it.",
  cross: "Cross-attention: rows are target tokens (the start token first), columns are source tokens: what each target position read of the source.",
};
// Above this many cells the large map is a canvas (no per-cell labels).
const MAX_TABLE_CELLS = 6400;
const GEN_TOKENS = 40;

const lightText = (t) => t < 0.6;
const maxOf = mapMax;

/** Draw a rows × cols map (Float32Array, row-major) into a canvas, one pixel per cell. */
function drawRect(canvas, values, rows, cols, { causal = false } = {}) {
  drawCells(canvas, values, { rows, cols, zmax: Math.max(mapMax(values), 1e-6), causal });
}

/** The mean over heads of a decoded (H, T, S) tensor, as a Float32Array (T * S). */
function headMean(decoded) {
  const [H, T, S] = decoded.shape;
  const mean = new Float32Array(T * S);
  for (let h = 0; h < H; h++) {
    const base = h * T * S;
    for (let k = 0; k < T * S; k++) mean[k] += decoded.values[base + k] / H;
  }
  return mean;
}

function oneMap(decoded, head) {
  if (head === "mean") return headMean(decoded);
  const [, T, S] = decoded.shape;
  return decoded.values.subarray((head - 1) * T * S, head * T * S);
}

/**
 * Wire the encoder-decoder card.  models: GET /api/models' list; sourceText(): the
 * page's text; modelName(): the chosen model's name (null: the default); form: the
 * page's form (its submit runs the card too).
 */
export function initStacks({ models, defaultModel, limits, form, sourceText, modelName }) {
  const card = byTestId("stacks-card");
  if (!card) return { update: () => {} };
  const $ = (id) => byTestId(id, card);
  const stacksForm = $("stacks-form");
  const grid = $("s2s-grid");
  const view = { stack: "encoder", layer: 1, head: 1, word: null, when: "written" };
  let data = null; // {source, target, written, layers, heads, maps: {stack: [decoded per layer]}}
  let seq = 0;
  let fromUrl = readHash(); // the first update() reads the view the link names

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

  function writeHash() {
    const p = new URLSearchParams();
    if (data) {
      p.set("target", $("s2s-target").value);
      p.set("stack", view.stack);
      p.set("layer", String(view.layer));
      p.set("head", String(view.head));
      if (view.word !== null) p.set("word", String(view.word));
      if (view.when !== "written") p.set("when", view.when);
    }
    const hash = data ? `#${p}` : "";
    const url = `${window.location.pathname}${window.location.search}${hash}`;
    if (url !== `${window.location.pathname}${window.location.search}${window.location.hash}`) window.history.replaceState(null, "", url);
  }

  const entryOf = (name) => models.find((m) => m.name === (name || defaultModel)) || null;
  const isEncoderDecoder = () => {
    const entry = entryOf(modelName());
    return Boolean(entry && entry.kind === ENCODER_DECODER);
  };

  // ---- fetching ----

  async function run(write) {
    const mine = ++seq;
    clearFieldErrors(stacksForm);
    const model = modelName();
    const text = sourceText();
    const target = $("s2s-target").value;
    // A target the model wrote for another source is that source's: drop it and say so.
    const dropped = Boolean(!write && data && data.written && text !== data.text && target === data.targetText);
    const writing = write || dropped || !target.trim();
    const base = { format: "compact", dtype: "uint8" };
    if (model) base.model = model;
    $("s2s-status").textContent = writing ? "The model is writing the target…" : "Running the model…";
    card.dataset.ready = "false";
    try {
      const answer = writing
        ? await post("/api/model/generate", {
            ...base,
            prompt: text,
            max_new_tokens: Math.min(GEN_TOKENS, limits.max_new_tokens || GEN_TOKENS),
          })
        : await post("/api/model/attention", { ...base, text, target });
      if (mine !== seq) return;
      if (!answer.cross_attentions) {
        throw new ApiError(422, [{ loc: ["model"], msg: `${answer.model} is not an encoder-decoder` }]);
      }
      data = {
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
      if (writing) $("s2s-target").value = answer.generated_text;
      view.layer = Math.min(view.layer, data.layers);
      if (view.head !== "mean") view.head = Math.min(view.head, data.heads);
      if (view.word !== null && view.word >= data.target.length) view.word = null;
      const what = writing ? `${answer.generated_ids.length} tokens written, ` : "";
      const why = dropped ? "The source changed, so the target the model had written for the last one was dropped and a new one written. " : "";
      $("s2s-status").textContent = `${why}${data.source.length} source and ${data.target.length} target tokens (${what}${data.layers} layers × ${data.heads} heads)`;
      render();
      card.dataset.ready = "true";
    } catch (err) {
      if (mine !== seq) return;
      showFieldErrors(stacksForm, err, (path) => (path[0] === "target" ? { key: "target", label: "The target" } : { key: "general" }));
      $("s2s-status").textContent = "";
    }
  }

  // ---- drawing ----

  function tokensOf(stack) {
    const rows = stack === "encoder" ? data.source : data.target;
    const cols = stack === "decoder" ? data.target : data.source;
    return { rows, cols };
  }

  function render() {
    view.layer = Math.min(view.layer, data.maps[view.stack].length); // stacks may differ in depth
    for (const tab of card.querySelectorAll("[role='tab']")) {
      const on = tab.dataset.stack === view.stack;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
    }
    $("s2s-panel").setAttribute("aria-labelledby", `s2s-tab-${view.stack}`);
    $("s2s-panel").dataset.stack = view.stack;
    $("s2s-axes").textContent = AXES[view.stack];
    drawGrid();
    drawLarge();
    updateOpenHead();
    const align = $("s2s-align");
    align.hidden = view.stack !== "cross";
    if (!align.hidden) drawAlignment();
    writeHash();
  }

  function drawGrid() {
    const heads = [...Array.from({ length: data.heads }, (_, i) => i + 1), "mean"];
    const cells = [el("span", { class: "col-label", "aria-hidden": "true" })];
    for (const head of heads) cells.push(el("span", { class: "col-label", text: head === "mean" ? "mean" : `H${head}` }));
    const { rows, cols } = tokensOf(view.stack);
    for (let layer = 1; layer <= data.maps[view.stack].length; layer++) {
      cells.push(el("span", { class: "row-label", text: `Layer ${layer}` }));
      for (const head of heads) {
        const name = head === "mean" ? `Layer ${layer}, mean of heads` : `Layer ${layer}, head ${head}`;
        const canvas = el("canvas", { width: 1, height: 1, "aria-hidden": "true" });
        const on = layer === view.layer && head === view.head;
        const button = el(
          "button",
          {
            type: "button",
            class: "map-btn",
            "data-testid": `s2s-map-L${layer}-${head === "mean" ? "mean" : `H${head}`}`,
            "aria-label": name,
            title: name,
            "aria-pressed": on ? "true" : "false",
            onclick: () => {
              view.layer = layer;
              view.head = head;
              render();
            },
          },
          [canvas],
        );
        drawRect(canvas, oneMap(data.maps[view.stack][layer - 1], head), rows.length, cols.length, {
          causal: view.stack === "decoder",
        });
        cells.push(button);
      }
    }
    grid.style.gridTemplateColumns = `3.4rem repeat(${heads.length}, 42px)`;
    grid.replaceChildren(...cells);
  }

  function drawLarge() {
    const { stack, layer, head } = view;
    const { rows, cols } = tokensOf(stack);
    const values = oneMap(data.maps[stack][layer - 1], head);
    const title = head === "mean" ? `Layer ${layer}, mean of heads` : `Layer ${layer}, head ${head}`;
    $("s2s-zoom-title").textContent = `${title} (${stack === "cross" ? "cross-attention" : stack})`;
    const table = $("s2s-map");
    table.dataset.stack = stack;
    table.dataset.layer = String(layer);
    table.dataset.head = String(head);
    table.dataset.rows = String(rows.length);
    table.dataset.cols = String(cols.length);
    const wrap = table.parentNode;
    for (const old of wrap.querySelectorAll("canvas")) old.remove();
    // Each map is coloured to its own largest weight: the bar says which number that is.
    let bar = wrap.parentNode.querySelector("[data-testid='s2s-colour-bar']");
    if (!bar) {
      bar = colourBar("s2s-colour-bar", { horizontal: true });
      wrap.after(bar);
    }
    setColourBar(bar, { zmax: Math.max(maxOf(values), 1e-6), label: "weight (the top colour is this map's largest)" });
    if (rows.length * cols.length > MAX_TABLE_CELLS) {
      table.replaceChildren();
      const canvas = el("canvas", { class: "s2s-big", "data-testid": "s2s-map-canvas" });
      drawRect(canvas, values, rows.length, cols.length, { causal: stack === "decoder" });
      wrap.append(canvas);
      return;
    }
    const zmax = Math.max(maxOf(values), 1e-6);
    const rowLabels = tokenLabels(rows);
    const colLabels = tokenLabels(cols);
    const head_ = el("tr", {}, [el("th", { scope: "col", class: "corner", text: "" })]);
    for (const label of colLabels) head_.append(el("th", { scope: "col", class: "col", text: label }));
    const body = rows.map((_, i) =>
      el("tr", {}, [
        el("th", { scope: "row", text: rowLabels[i] }),
        ...cols.map((_c, j) => {
          if (stack === "decoder" && j > i) return el("td", { class: "masked", title: "masked" });
          const v = values[i * cols.length + j];
          const t = v / zmax;
          return el("td", {
            style: `background: ${css(rgbAt(t))}`,
            title: `${rowLabels[i]} → ${colLabels[j]}: ${v.toFixed(3)}`,
            "data-weight": v.toFixed(4),
          });
        }),
      ]),
    );
    table.replaceChildren(el("thead", {}, [head_]), el("tbody", {}, body));
  }

  /** The link from the large map's head to its steps in the explorer (or why there is none). */
  function updateOpenHead() {
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

  // ---- the alignment view (cross-attention) ----

  function drawAlignment() {
    const labels = tokenLabels(data.target);
    const words = $("s2s-words");
    words.replaceChildren(
      ...data.target.slice(1).map((token, k) =>
        el("button", {
          type: "button",
          class: "wp-token",
          "data-testid": "s2s-word",
          "data-index": k + 1,
          "aria-pressed": view.word === k + 1 ? "true" : "false",
          text: labels[k + 1],
          onclick: () => {
            view.word = k + 1;
            drawAlignment();
            writeHash();
          },
        }),
      ),
    );
    const out = $("s2s-align-view");
    const what = $("s2s-align-what");
    if (view.word === null) {
      out.replaceChildren();
      out.dataset.token = "";
      what.textContent = "";
      return;
    }
    const i = view.word;
    const row = view.when === "written" ? i - 1 : i;
    out.dataset.token = String(i);
    out.dataset.row = String(row);
    if (row >= data.target.length) {
      what.textContent = `“${labels[i]}” was the last token written: it was never the decoder's input.`;
      out.replaceChildren();
      return;
    }
    what.textContent =
      view.when === "written"
        ? `While writing “${labels[i]}” (the decoder's input was “${labels[row]}”), each head read these source words:`
        : `With “${labels[i]}” as its input (writing the next word), each head read these source words:`;
    const S = data.source.length;
    const sourceLabels = tokenLabels(data.source);
    const blocks = [];
    for (let layer = 1; layer <= data.maps.cross.length; layer++) {
      const decoded = data.maps.cross[layer - 1];
      const mean = headMean(decoded);
      const lines = [];
      for (const head of [...Array.from({ length: data.heads }, (_, h) => h + 1), "mean"]) {
        const values = head === "mean" ? mean : oneMap(decoded, head);
        const rowValues = values.subarray(row * S, (row + 1) * S);
        const zmax = Math.max(maxOf(rowValues), 1e-6);
        lines.push(
          el("tr", { "data-testid": "s2s-align-row", "data-layer": layer, "data-head": head }, [
            el("th", { scope: "row", text: head === "mean" ? "mean" : `H${head}` }),
            ...Array.from(rowValues, (v, j) => {
              const t = v / zmax;
              return el("td", {
                class: lightText(t) ? "light" : "",
                style: `background: ${css(rgbAt(t))}`,
                title: `${sourceLabels[j]}: ${v.toFixed(3)}`,
                "data-weight": v.toFixed(4),
                text: sourceLabels[j],
              });
            }),
          ]),
        );
      }
      blocks.push(
        el("div", { class: "s2s-align-layer" }, [
          el("h4", { text: `Layer ${layer}` }),
          el("div", { class: "s2s-map-wrap" }, [el("table", { class: "s2s-align-table" }, [el("tbody", {}, lines)])]),
        ]),
      );
    }
    out.replaceChildren(...blocks);
  }

  // ---- events ----

  for (const tab of card.querySelectorAll("[role='tab']")) {
    tab.addEventListener("click", () => {
      view.stack = tab.dataset.stack;
      if (data) render();
    });
    tab.addEventListener("keydown", (ev) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[ev.key];
      if (!step) return;
      ev.preventDefault();
      view.stack = STACKS[(STACKS.indexOf(view.stack) + step + STACKS.length) % STACKS.length];
      if (data) render();
      card.querySelector(`[data-stack='${view.stack}']`).focus();
    });
  }
  for (const radio of card.querySelectorAll("input[name='s2s-when']")) {
    radio.addEventListener("change", () => {
      view.when = radio.value;
      if (data) drawAlignment();
      writeHash();
    });
  }
  stacksForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(false);
  });
  $("s2s-write").addEventListener("click", () => run(true));
  form.addEventListener("submit", () => {
    if (isEncoderDecoder()) run(false);
  });

  /** Show or hide the card for the chosen model, and fill it. */
  function update() {
    const on = isEncoderDecoder();
    card.hidden = !on;
    const asked = fromUrl;
    fromUrl = null;
    if (!on) {
      seq++;
      data = null;
      writeHash();
      return;
    }
    if (asked && asked.target.trim()) {
      Object.assign(view, { stack: asked.stack, layer: asked.layer, head: asked.head, word: asked.word, when: asked.when });
      for (const radio of card.querySelectorAll("input[name='s2s-when']")) radio.checked = radio.value === view.when;
      $("s2s-target").value = asked.target;
      run(false);
      return;
    }
    $("s2s-target").value = "";
    run(true);
  }

  return { update };
}
