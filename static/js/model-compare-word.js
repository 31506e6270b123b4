// /model's "compare one word" card (encoders): one word's vector in two texts, its
// cosine layer by layer (POST /api/model/compare-word), as a table and a plot.

import { clearErrors, showErrors } from "./api.js";
import { el } from "./dom.js";
import { modelApi } from "./model-data.js";
import { drawCosines } from "./model-plots.js";

async function runCompare({ $, state }) {
  const form = $("compare-word-form");
  clearErrors(form);
  const body = { text_a: state.cw.text_a, text_b: state.cw.text_b, word: state.cw.word, ...(state.model ? { model: state.model } : {}) };
  try {
    const result = await modelApi.compareWord(body);
    const rows = result.cosines.map((c, i) =>
      el("tr", { "data-testid": "cw-row" }, [
        el("th", { scope: "row", text: i === 0 ? "0 (embeddings)" : String(i) }),
        el("td", { "data-testid": "cw-cosine", text: c.toFixed(4) }),
      ]),
    );
    $("cw-rows").replaceChildren(...rows);
    await drawCosines($("cw-plot"), { cosines: result.cosines, word: result.word });
  } catch (err) {
    showErrors(form, err);
  }
}

/** Mount the card over the page; {run()} compares the state's word (the URL's, at start). */
export function mountCompareWord(page) {
  const { $, state } = page;
  $("compare-word-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.cw = { text_a: $("cw-text-a").value, text_b: $("cw-text-b").value, word: $("cw-word").value.trim() };
    page.writeUrl();
    runCompare(page);
  });
  return { run: () => runCompare(page) };
}
