// The saved runs on /train (GET /api/runs): each run's step of the ladder, sizes,
// losses and age, a link to it on /model, and Delete (DELETE /api/runs/{name}).

import { api } from "./api.js";
import { el } from "./dom.js";
import { countOf } from "./labels.js";

const loss = (value) => (typeof value === "number" && Number.isFinite(value) ? value.toFixed(4) : "–");

function when(seconds) {
  const date = new Date(seconds * 1000);
  return date.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" });
}

/** One line of settings: the step of the ladder and what it was built and trained with. */
function settings(run, titles) {
  const c = run.config || {};
  const parts = [titles[run.architecture] || run.architecture || "run"];
  if (c.n_layer) parts.push(`${countOf(c.n_layer, "layer")} × ${countOf(c.n_head, "head")}`);
  parts.push(`n_embd ${c.n_embd}`, `block_size ${c.block_size}`, `${countOf(run.steps ?? c.max_steps, "step")}`);
  if (run.parameters) parts.push(`${countOf(run.parameters, "parameter")}`);
  return parts.join(" · ");
}

function runItem(run, titles, onDelete) {
  const remove = el("button", {
    type: "button",
    class: "run-delete",
    "data-testid": "run-delete",
    "aria-label": `Delete ${run.name}`,
    text: "Delete",
    onclick: () => onDelete(run.name, remove),
  });
  return el("li", { class: "run", "data-testid": "run", "data-name": run.name }, [
    el("div", { class: "run-head" }, [
      el("a", { href: run.model_url, "data-testid": "run-link", text: run.name }),
      el("span", { class: "run-when", text: when(run.modified) }),
      remove,
    ]),
    el("p", { class: "run-settings", "data-testid": "run-settings", text: settings(run, titles) }),
    el("p", {
      class: "run-losses",
      "data-testid": "run-losses",
      text: `val loss ${loss(run.val_loss)} · train ${loss(run.train_loss)} · untrained ${loss(run.untrained_val_loss)} · bigram ${loss(run.baseline_val_loss)}`,
    }),
  ]);
}

/** Fill `box` (its list, directory line and error line) from GET /api/runs. */
export async function showRuns(box, titles) {
  const list = box.querySelector("[data-testid='runs-list']");
  const where = box.querySelector("[data-testid='runs-dir']");
  const error = box.querySelector("[data-testid='runs-error']");
  async function refresh() {
    try {
      const body = await api.runs();
      where.textContent = `Saved in ${body.runs_dir} (the newest ${body.keep} are kept; every server of this user on this machine shares this directory unless ATTENTION_VIZ_RUNS_DIR names another).`;
      list.replaceChildren(...body.runs.map((run) => runItem(run, titles, remove)));
      if (!body.runs.length) list.replaceChildren(el("li", { class: "hint", "data-testid": "runs-empty", text: "No saved runs yet." }));
    } catch (err) {
      error.textContent = `The runs could not be listed: ${err.message}`;
    }
  }
  async function remove(name, button) {
    if (!window.confirm(`Delete the run ${name}? Its checkpoint is removed from the server.`)) return;
    button.disabled = true;
    error.textContent = "";
    try {
      await api.deleteRun(name);
    } catch (err) {
      error.textContent = `${name} was not deleted: ${err.message}`;
      button.disabled = false;
      return;
    }
    await refresh();
  }
  await refresh();
  return refresh;
}
