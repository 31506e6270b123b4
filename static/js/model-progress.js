// The model's progress bar: the streamed maps request's `progress` events (layer n of L
// of the forward pass, token n of N of a generation) and, once a stage has a pace, its
// remaining seconds.  Shown only when a request takes more than SHOW_AFTER_MS: a quick
// answer never flashes it.

export const SHOW_AFTER_MS = 1000;
const STAGES = {
  load: { what: "Reading the weights", unit: "layer", finished: "Weights read: running the model…" },
  forward: { what: "Forward pass", unit: "layer", finished: "Forward pass done: preparing the maps…" },
  generate: { what: "Writing", unit: "token", finished: "Written: preparing the maps…" },
  maps: { what: "Building the maps", unit: "layer", finished: "Maps built: sending them…" },
  value_norm: { what: "Value-weighted maps", unit: "layer", finished: "Value-weighted maps done: preparing them…" },
};

function seconds(s) {
  return s < 10 ? `${Math.max(1, Math.round(s))} s` : `${Math.round(s / 5) * 5} s`;
}

/**
 * What the bar says for one progress event (or null: the request has just started),
 * `since` seconds after it arrived.  The server's estimate (the stage's pace so far)
 * counts down; once the next unit is later than that pace foretold, none is given.
 */
export function progressText(p, since = 0) {
  if (!p) return "Running the model…";
  if (p.stage === "queued") return "Waiting for a free model thread…";
  const stage = STAGES[p.stage] || { what: p.stage, unit: "step", finished: `${p.stage} done` };
  if (p.done >= p.total) return stage.finished;
  const eta = p.eta_s === null || p.done === 0 ? null : p.eta_s - since;
  const left = eta !== null && eta >= 0.5 ? `, about ${seconds(eta)} left` : "";
  return `${stage.what}: ${stage.unit} ${p.done} of ${p.total}${left}`;
}

/** The bar's words, ARIA values and fill for the last progress event (null: not yet), `elapsed` seconds after it. */
function paintProgress(root, { fill, text }, last, elapsed) {
  const words = progressText(last, elapsed);
  text.textContent = words;
  root.setAttribute("aria-valuetext", words);
  const measured = last && last.total > 0;
  if (measured) {
    root.setAttribute("aria-valuemax", String(last.total));
    root.setAttribute("aria-valuenow", String(last.done));
  } else {
    root.removeAttribute("aria-valuenow"); // indeterminate
  }
  root.dataset.stage = last ? last.stage : "";
  fill.style.width = measured ? `${(100 * last.done) / last.total}%` : "0%";
}

/**
 * The bar in `root` (role="progressbar", with a .model-progress-fill and a
 * .model-progress-text inside): start() when a request starts, update(event) on each
 * progress event, stop() when it ends (answered, failed or replaced).
 */
export function progressBar(root) {
  const fill = root.querySelector(".model-progress-fill");
  const text = root.querySelector(".model-progress-text");
  let timer = null;
  let ticker = null; // re-renders each second while shown: the estimate counts down
  let last = null;
  let lastAt = 0;

  const render = () => paintProgress(root, { fill, text }, last, (performance.now() - lastAt) / 1000);

  return {
    start() {
      this.stop();
      last = null;
      timer = setTimeout(() => {
        timer = null;
        render();
        root.hidden = false;
        ticker = setInterval(render, 1000);
      }, SHOW_AFTER_MS);
    },
    update(event) {
      last = event;
      lastAt = performance.now();
      if (!root.hidden) render();
    },
    stop() {
      clearTimeout(timer);
      clearInterval(ticker);
      timer = ticker = null;
      root.hidden = true;
    },
  };
}
