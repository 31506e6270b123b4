// The logit lens on /model (POST /api/model/logit-lens), a decoder's: after each layer,
// every position's residual stream through the final norm and the language-model head,
// its most likely next token coloured by its probability (hover: the top five).

import { errorText, isAbort, post } from "./api.js";
import { colourBar, setColourBar } from "./colour-bar.js";
import { el } from "./dom.js";
import { shownToken } from "./model-ablate-card.js";
import { colour } from "./score-grid.js";

/** The layer × position table of top tokens. */
function lensTable(answer) {
  const head = el("tr", {}, [el("th", { scope: "col", text: "layer" }), ...answer.tokens.map((t) => el("th", { scope: "col", class: "tok", text: shownToken(t) }))]);
  const cell = (tops, p) => {
    const c = colour(p[0]);
    return el("td", { class: "tok", style: `background:${c.background};color:${c.color}`, title: tops.map((t, k) => `${shownToken(t)} ${p[k].toFixed(3)}`).join("\n"), text: shownToken(tops[0]) });
  };
  const rows = answer.top_tokens.map((layer, l) =>
    el("tr", { "data-testid": "lens-row" }, [
      el("th", { scope: "row", text: l + 1 === answer.layers ? `${l + 1} (output)` : String(l + 1) }),
      ...layer.map((tops, i) => cell(tops, answer.top_probs[l][i])),
    ]),
  );
  return el("table", { class: "lens-table", "data-testid": "lens-table" }, [
    el("caption", { text: "Top next token after each layer (colour: its probability)" }),
    el("thead", {}, [head]),
    el("tbody", {}, rows),
  ]);
}

/** The card: its title, what the lens is, and `parts` (the button, status, error and table box). */
function lensCard(parts) {
  return el("section", { class: "card lens-card", "data-testid": "lens-card", "aria-labelledby": "lens-title" }, [
    el("h2", { id: "lens-title", text: "Logit lens: what each layer would predict" }),
    el("p", {
      class: "hint",
      text:
        "After each layer, the residual stream of every position through the final norm and the language-model head: its most likely next token (hover for the top five). The last row is the model's own prediction.",
    }),
    ...parts,
  ]);
}

/** Mount the lens card (live: {seq(), signal()}); {element, show(context)}; context = {model, text, causal, pick}. */
export function mountLens({ live }) {
  const run = el("button", { type: "button", "data-testid": "lens-run", text: "Show the logit lens" });
  const status = el("p", { class: "status", "data-testid": "lens-status", "aria-live": "polite" });
  const error = el("p", { class: "error", role: "alert", "data-testid": "lens-error" });
  const box = el("div", { class: "lens-box", "data-testid": "lens-box" });
  const bar = colourBar("lens-colour-bar", { horizontal: true });
  const card = lensCard([run, status, error, box]);
  let context = null;

  async function lens() {
    const mine = live.seq();
    error.textContent = "";
    status.textContent = "Reading every layer…";
    const body = { text: context.text, ...(context.model ? { model: context.model } : {}) };
    try {
      const answer = await post("/api/model/logit-lens", body, live.signal());
      if (mine !== live.seq()) return;
      status.textContent = "";
      box.replaceChildren(lensTable(answer), bar);
      setColourBar(bar, { zmax: 1, label: "probability of the top token" });
    } catch (err) {
      if (mine !== live.seq() || isAbort(err)) return;
      status.textContent = "";
      error.textContent = errorText(err);
    }
  }
  run.addEventListener("click", lens);

  return {
    element: card,
    show(next) {
      context = next;
      box.replaceChildren();
      card.hidden = !next.causal || Boolean(next.pick); // an encoder-decoder's decoder lens: not here yet
    },
  };
}
