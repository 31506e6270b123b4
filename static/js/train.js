// The training page: pick a step of the ladder and a size, train it on the
// server (POST /api/train, streamed), and watch the loss fall and the probe's
// attention form; scrub back through the snapshots; open the result on /model.

import { ApiError, clearErrors, showErrors, stream } from "./api.js";
import { plainMessage } from "./feedback.js";
import { byTestId, el, initialData } from "./dom.js";
import { decodeCompact } from "./model-data.js";
import { heatGrid } from "./score-grid.js";
import { buildGrid, drawGrid, drawLoss, drawZoom, markPicked } from "./train-plots.js";
import { showRuns } from "./train-runs.js";

const init = initialData();
const DESCRIPTIONS = Object.fromEntries(init.architectures.map((a) => [a.name, a.description]));
const form = byTestId("train-form");
const $ = (id) => byTestId(id);

const SIZES = ["n_layer", "n_head", "n_embd", "block_size", "batch_size", "max_steps", "learning_rate", "seed"];
const STEP_TITLES = {
  bigram: "1 · Bigram",
  average: "2 · Average the past",
  single_head: "3 · One head",
  multi_head: "4 · Several heads",
  gpt: "5 · GPT blocks",
};
// What a rung fixes, whatever the inputs say: the server's table (FIXED_SETTINGS).
const FIXED = init.fixed;
// Which error box shows a server error about a field.
const ERROR_BOXES = Object.fromEntries([...SIZES.map((f) => [f, "sizes"]), ["file", "text"], ["architecture", "general"]]);
// The server's limit (GET /api/train/presets) behind each input's max.
const LIMITS = {
  n_layer: "train_max_layers",
  n_head: "max_heads",
  n_embd: "train_max_embd",
  block_size: "train_max_block_size",
  batch_size: "train_max_batch_size",
  max_steps: "train_max_steps",
};
const REDRAW_MS = 200;
// An error in words, from its type and ctx (feedback.js), named by its field.
const wordError = (item, field) =>
  plainMessage(item, field || "This value", { maxHeads: init.limits.max_heads, widthName: "n_embd" });

const state = { architecture: "gpt", values: {}, source: "corpus", probe: "" };
let run = null;
let refreshRuns = async () => {};

// ---------- the form ----------

function presetOf(architecture) {
  return init.presets[architecture];
}

function setArchitecture(architecture, keepValues = false) {
  state.architecture = architecture;
  const preset = presetOf(architecture);
  for (const field of SIZES) {
    const input = $(field);
    const fixed = FIXED[architecture][field];
    if (!keepValues || input.value === "") input.value = String(preset[field]);
    if (fixed !== undefined) input.value = String(fixed);
    input.disabled = fixed !== undefined;
  }
  for (const button of $("ladder").querySelectorAll("button")) {
    button.setAttribute("aria-pressed", button.dataset.architecture === architecture ? "true" : "false");
  }
  $("ladder-hint").textContent = DESCRIPTIONS[architecture];
  writeUrl();
}

function setSource(source) {
  state.source = source;
  for (const radio of form.querySelectorAll('input[name="source"]')) radio.checked = radio.value === source;
  for (const box of form.querySelectorAll("[data-source]")) box.hidden = box.dataset.source !== source;
  $("corpus-excerpt").hidden = source !== "corpus";
  writeUrl();
}

function readUrl() {
  const p = new URLSearchParams(window.location.search);
  const arch = p.get("arch");
  state.architecture = arch && init.presets[arch] ? arch : "gpt";
  for (const field of SIZES) if (p.has(field)) state.values[field] = p.get(field);
  if (p.has("probe")) state.probe = p.get("probe");
}

function writeUrl() {
  const p = new URLSearchParams();
  p.set("arch", state.architecture);
  const preset = presetOf(state.architecture);
  for (const field of SIZES) {
    const value = $(field).value;
    if (value !== "" && !$(field).disabled && Number(value) !== preset[field]) p.set(field, value);
  }
  if ($("probe").value) p.set("probe", $("probe").value);
  history.replaceState(null, "", `${window.location.pathname}?${p}`);
}

function buildLadder() {
  const ladder = $("ladder");
  for (const { name, description } of init.architectures) {
    ladder.append(
      el(
        "button",
        {
          type: "button",
          class: "step",
          "data-testid": `arch-${name}`,
          "aria-pressed": "false",
          dataset: { architecture: name },
          title: description,
          onclick: () => setArchitecture(name),
        },
        [el("strong", { text: STEP_TITLES[name] || name })],
      ),
    );
  }
}

/** The request: JSON, or multipart when a file is uploaded. */
function requestBody() {
  const settings = { architecture: state.architecture };
  for (const field of SIZES) {
    const input = $(field);
    if (input.disabled || input.value === "") continue;
    settings[field] = Number(input.value);
  }
  if ($("probe").value) settings.probe = $("probe").value;
  if (state.source === "paste") settings.text = $("text").value;
  if (state.source !== "file") return settings;
  const file = $("file").files[0];
  if (!file) throw new ApiError(422, [{ loc: ["body", "text"], msg: "choose a file to upload" }]);
  const data = new FormData();
  for (const [key, value] of Object.entries(settings)) data.append(key, String(value));
  data.append("file", file, file.name);
  return data;
}

// ---------- a run ----------

function newRun() {
  return {
    controller: new AbortController(),
    name: null,
    maxSteps: Number($("max_steps").value) || 1,
    step: 0,
    losses: { batch: [], train: [], val: [] },
    baseline: null,
    snapshots: [],
    tokens: [],
    canvases: [],
    pick: [0, 0],
    follow: true,
    done: false,
    timer: null,
    dirty: { loss: false, maps: false },
  };
}

function schedule(what) {
  run.dirty[what] = true;
  if (run.timer) return;
  const current = run;
  current.timer = setTimeout(() => {
    current.timer = null;
    redraw(current);
  }, REDRAW_MS);
}

function redraw(r) {
  if (r.dirty.loss) {
    r.dirty.loss = false;
    drawLoss($("loss-plot"), r.losses, r.baseline, r.maxSteps);
  }
  if (r.dirty.maps) {
    r.dirty.maps = false;
    showSnapshot(r, Number($("snapshot-slider").value));
  }
}

function showSnapshot(r, index) {
  const snapshot = r.snapshots[index];
  if (!snapshot) return;
  $("snapshot-step").textContent = String(snapshot.step);
  drawGrid(r.canvases, snapshot);
  const [layer, head] = r.pick;
  $("zoom-title").textContent = `Layer ${layer + 1}, head ${head + 1} after step ${snapshot.step}`;
  $("zoom-plot").hidden = false;
  drawZoom($("zoom-plot"), snapshot, layer, head, r.tokens);
  drawSnapshotScores(snapshot);
}

/** The chosen head-type score of every head at this snapshot (a layer × head grid). */
function drawSnapshotScores(snapshot) {
  const names = Object.keys(snapshot.scores);
  const box = $("train-scores");
  box.hidden = names.length === 0;
  if (!names.length) return;
  const select = $("train-score");
  if (select.options.length !== names.length) {
    const chosen = select.value;
    select.replaceChildren(...names.map((n) => el("option", { value: n, text: n.replace(/_/g, " ") })));
    if (names.includes(chosen)) select.value = chosen;
  }
  const name = select.value;
  $("train-score-grid").replaceChildren(
    heatGrid({ values: snapshot.scores[name], testid: "train-score-cells", label: name.replace(/_/g, " "), click: (l, h) => pick(l - 1, h - 1) }),
  );
  $("train-score-grid").dataset.step = String(snapshot.step);
}

function pick(layer, head) {
  if (!run) return;
  run.pick = [layer, head];
  markPicked($("attn-grid"), layer, head);
  showSnapshot(run, Number($("snapshot-slider").value));
}

function formatSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "–";
  const whole = Math.max(0, Math.round(s));
  return whole >= 60 ? `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s` : `${whole} s`;
}

/** The line beside the bar: the step, then `tail` (time left, or how it ended), then the
 * latest evaluation (the val loss and the step it was measured at). */
function progressLine(r, tail) {
  const last = r.losses.val[r.losses.val.length - 1];
  const val = last ? ` · val loss ${last[1].toFixed(4)} at step ${last[0]}` : "";
  return `Step ${r.step} / ${r.maxSteps}${tail}${val}`;
}

const handlers = {
  start(data) {
    run.name = data.name;
    run.baseline = data.baseline_val_loss;
    run.maxSteps = data.config.max_steps;
    run.tokens = data.probe_tokens;
    $("train-progress").max = run.maxSteps;
    const fixed = data.fixed_at_zero.length ? `, ${data.fixed_at_zero.length} tensors fixed at zero` : "";
    $("run-summary").textContent =
      `${STEP_TITLES[data.config.architecture]}: ${data.parameters.toLocaleString("en")} parameters` +
      `${fixed}; vocabulary ${data.vocab_size} characters; ` +
      `${data.train_chars.toLocaleString("en")} training characters; bigram baseline ${data.baseline_val_loss.toFixed(4)}.`;
    $("train-status").textContent = "Training…";
    run.canvases = data.n_layer ? buildGrid($("attn-grid"), data.n_layer, data.n_head, pick) : [];
    if (!data.n_layer) {
      $("attn-grid").replaceChildren(el("p", { class: "hint", text: "A bigram model has no attention: it sees one character." }));
    } else {
      markPicked($("attn-grid"), 0, 0);
    }
    schedule("loss");
  },
  progress(data) {
    run.step = data.step;
    $("train-progress").value = data.step;
    if (data.train_loss !== null) run.losses.batch.push([data.step, data.train_loss]);
    if (data.val_loss !== null) {
      run.losses.val.push([data.step, data.val_loss]);
      run.losses.train.push([data.step, data.eval_train_loss]);
    }
    const rate = data.tokens_per_s ? ` · ${Math.round(data.tokens_per_s).toLocaleString("en")} characters/s` : "";
    $("progress-text").textContent = progressLine(run, ` · ${formatSeconds(data.eta_s)} left${rate}`);
    schedule("loss");
  },
  snapshot(data) {
    if (!data.attention) return;
    run.snapshots.push({ step: data.step, ...decodeCompact(data.attention), shape: data.attention.shape, scores: data.scores || {} });
    const slider = $("snapshot-slider");
    slider.max = String(run.snapshots.length - 1);
    slider.disabled = run.snapshots.length < 2;
    if (run.follow) slider.value = slider.max;
    schedule("maps");
  },
  sample(data) {
    $("sample-prompt").textContent = data.prompt;
    $("sample-text").textContent = data.text;
    $("sample-step").textContent = `after step ${data.step}`;
  },
  done(data) {
    run.done = true;
    setRunning(false); // the stream closes once the process has exited
    $("train-progress").value = run.maxSteps;
    // The last evaluation is the final one: the same figure as the status below.
    if (!run.losses.val.length || run.losses.val[run.losses.val.length - 1][0] !== data.step) {
      run.losses.val.push([data.step, data.val_loss]);
    }
    run.step = data.step;
    $("progress-text").textContent = progressLine(run, " · finished");
    $("train-status").textContent =
      `Done in ${formatSeconds(data.elapsed_s)}: val loss ${data.val_loss.toFixed(4)} ` +
      `(untrained ${data.untrained_val_loss.toFixed(4)}, bigram ${data.baseline_val_loss.toFixed(4)}).`;
    $("model-name").textContent = data.name;
    $("open-model").href = data.model_url;
    // The link is shown once the stream has ended (below): leaving the page before then
    // would abort a run that is still pruning old runs.
  },
  error(data) {
    showErrors(form, new ApiError(422, data.detail), ERROR_BOXES, wordError);
    $("train-status").textContent = "The run stopped with an error.";
  },
};

function setRunning(running) {
  $("train-start").disabled = running;
  $("train-stop").disabled = !running;
  form.setAttribute("aria-busy", running ? "true" : "false");
}

async function start() {
  clearErrors(form);
  let body;
  try {
    body = requestBody();
  } catch (err) {
    showErrors(form, err, ERROR_BOXES, wordError);
    return;
  }
  if (run && run.timer) clearTimeout(run.timer);
  run = newRun();
  const current = run;
  clearRunView();
  setRunning(true);
  try {
    await streamRun(current, body);
  } catch (err) {
    runFailed(current, err);
  } finally {
    if (run === current) {
      setRunning(false);
      redraw(current);
    }
  }
}

/** The progress, sample, snapshots and status of the last run, emptied for a new one. */
function clearRunView() {
  $("train-done").hidden = true;
  $("train-progress").value = 0;
  $("progress-text").textContent = "Starting a training process…";
  $("sample-prompt").textContent = "";
  $("sample-text").textContent = "";
  $("sample-step").textContent = "";
  $("snapshot-slider").disabled = true;
  $("snapshot-slider").max = "0";
  $("snapshot-step").textContent = "–";
  $("train-status").textContent = "Starting…";
}

/** POST /api/train, its events to the handlers while this run is the page's; then done, or ended early. */
async function streamRun(current, body) {
  await stream("/api/train", body, {
    signal: current.controller.signal,
    onEvent: (name, data) => {
      if (run === current && handlers[name]) handlers[name](data);
    },
  });
  if (current.done && run === current) {
    $("train-done").hidden = false;
    refreshRuns();
  }
  if (!current.done && $("train-status").textContent === "Training…") {
    $("train-status").textContent = "The connection ended before the run finished.";
    if (current.name) $("progress-text").textContent = progressLine(current, " · ended");
  }
}

/** The run was stopped (Stop aborts its request) or could not go on: say which. */
function runFailed(current, err) {
  if (current.controller.signal.aborted) {
    $("train-status").textContent = `Stopped at step ${current.step} (nothing saved).`;
    if (current.name) $("progress-text").textContent = progressLine(current, " · stopped");
  } else {
    showErrors(form, err, ERROR_BOXES, wordError);
    $("train-status").textContent = err.status === 429 ? "The server is busy." : "Not started.";
    if (!current.name) $("progress-text").textContent = "Not started.";
  }
}

function stop() {
  if (run) run.controller.abort();
}

// ---------- wiring ----------

function setup() {
  readUrl();
  buildLadder();
  $("corpus-size").textContent = init.corpus.characters.toLocaleString("en");
  $("corpus-excerpt").textContent = `${init.corpus.excerpt}…`;
  setArchitecture(state.architecture);
  for (const [field, value] of Object.entries(state.values)) if (!$(field).disabled) $(field).value = value;
  $("probe").value = state.probe;
  $("probe").placeholder = init.default_probe;
  setSource("corpus");
  for (const field of SIZES) {
    $(field).addEventListener("change", writeUrl);
    if (LIMITS[field]) $(field).max = String(init.limits[LIMITS[field]]);
  }
  $("probe").addEventListener("change", writeUrl);
  for (const radio of form.querySelectorAll('input[name="source"]')) {
    radio.addEventListener("change", () => setSource(radio.value));
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start();
  });
  $("train-stop").addEventListener("click", stop);
  $("snapshot-slider").addEventListener("input", () => {
    if (!run) return;
    const slider = $("snapshot-slider");
    run.follow = slider.value === slider.max;
    showSnapshot(run, Number(slider.value));
  });
  $("train-score").addEventListener("change", () => {
    if (run) showSnapshot(run, Number($("snapshot-slider").value));
  });
  drawLoss($("loss-plot"), { batch: [], train: [], val: [] }, null, Number($("max_steps").value) || 1);
  showRuns($("runs-card"), STEP_TITLES).then((refresh) => {
    refreshRuns = refresh;
  });
}

setup();
