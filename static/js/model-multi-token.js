// Several query tokens at once in the token view: chosen with shift- or ctrl-click on the
// token list, or with "Select several" on (then a click or Enter adds or removes a
// token), listed as chips that remove themselves; the token view then shows the rows of
// the chosen tokens summed or averaged (a toggle), in every head of a layer and in every
// layer.  Combining: key j's weight is Σ_q A[q, j] (or that over the count); in a decoder
// a token's row stops at itself, so its weights for the keys after it count 0.
//
// The selection is in the URL: `toks=3,5,9` and `comb=sum` (the mean is the default).

import { el } from "./dom.js";
import { visibleToken } from "./labels.js";

export const COMBINE = { mean: "averaged", sum: "summed" };

/** The tokens the token view shows: several chosen, or the one chosen, or none. */
export const chosenTokens = (state) => (state.tokens.length > 1 ? state.tokens : state.token === null ? [] : [state.token]);

/** `toks`'s value as a sorted list of distinct token indices (bad entries dropped). */
export function parseTokens(raw) {
  if (!raw) return [];
  const ids = raw
    .split(",")
    .map((part) => part.trim())
    .filter((part) => /^\d+$/.test(part))
    .map(Number);
  return [...new Set(ids)].sort((a, b) => a - b);
}

/** The selection after a click on token i: added, or removed when it was in it; the token
 * shown alone so far (`current`) starts the selection. */
export function toggled(selection, current, i) {
  const start = selection.length ? selection : current === null || current === undefined ? [] : [current];
  const next = start.includes(i) ? start.filter((t) => t !== i) : [...start, i];
  return next.sort((a, b) => a - b);
}

/**
 * Rows of several queries as one: per key, the sum (or the mean) of the rows; a shorter
 * row (a decoder's earlier token) counts 0 past its end, a null (masked) cell 0.  Null
 * when any row is missing.
 */
export function combinedRow(rows, combine) {
  if (!rows.length || rows.some((r) => !r)) return null;
  const keys = Math.max(...rows.map((r) => r.length));
  const out = new Array(keys).fill(0);
  for (const row of rows) row.forEach((v, j) => (out[j] += v === null || !Number.isFinite(v) ? 0 : v));
  return combine === "sum" ? out : out.map((v) => v / rows.length);
}

/**
 * The chips, the "Select several" toggle and the sum/mean choice, made once into `box`
 * (the token view's container for them).  handlers: {onRemove(i), onClear(), onCombine(c),
 * onSelecting(on)}.  Returns {update({selection, tokens, combine}), selecting()}.
 */
export function mountTokenSelection(box, { onRemove, onClear, onCombine, onSelecting }) {
  const toggle = el("button", { type: "button", class: "tv-several", "data-testid": "tv-several", "aria-pressed": "false", text: "Select several" });
  const chips = el("ul", { class: "tv-chips", "data-testid": "tv-chips", "aria-label": "Chosen tokens" });
  const clear = el("button", { type: "button", "data-testid": "tv-clear", text: "Clear", hidden: true });
  const radios = ["mean", "sum"].map((value) =>
    el("label", {}, [el("input", { type: "radio", name: "tv-combine", value, "data-testid": `tv-combine-${value}` }), ` ${value === "mean" ? "average" : "sum"}`]),
  );
  const combineBox = el("fieldset", { class: "tv-combine", "data-testid": "tv-combine", hidden: true }, [el("legend", { text: "Several tokens' rows" }), ...radios]);
  const help = el("p", { class: "hint", "data-testid": "tv-several-help", text: "Shift- or Ctrl-click tokens in the list (or turn on “Select several”, then click or press Enter on them) to see several tokens' rows at once." });
  box.replaceChildren(el("div", { class: "tv-select-row" }, [toggle, chips, clear]), combineBox, help);
  toggle.addEventListener("click", () => {
    const on = toggle.getAttribute("aria-pressed") !== "true";
    toggle.setAttribute("aria-pressed", String(on));
    onSelecting(on);
  });
  clear.addEventListener("click", onClear);
  combineBox.addEventListener("change", (ev) => onCombine(ev.target.value));
  return {
    selecting: () => toggle.getAttribute("aria-pressed") === "true",
    update({ selection, tokens, combine }) {
      const several = selection.length > 1;
      chips.replaceChildren(
        ...selection.map((i) =>
          el("li", {}, [
            el("button", {
              type: "button",
              class: "tv-chip",
              "data-testid": "tv-chip",
              "data-index": i,
              "aria-label": `Remove ${tokens[i] ?? ""} (token ${i}) from the chosen tokens`,
              title: "Remove from the chosen tokens",
              text: `${visibleToken(tokens[i] ?? "")}·${i} ×`,
              onclick: () => onRemove(i),
            }),
          ]),
        ),
      );
      clear.hidden = selection.length === 0;
      combineBox.hidden = !several;
      for (const radio of combineBox.querySelectorAll("input")) radio.checked = radio.value === combine;
    },
  };
}

/** Press the buttons of the chosen tokens in the token list (those on its page shown). */
export function markTokens(list, selection) {
  for (const b of list.querySelectorAll("[data-testid='wp-token']")) {
    b.setAttribute("aria-pressed", String(selection.includes(Number(b.dataset.index))));
  }
}

/** Whether a click (or Enter) on a token adds it to the selection rather than shows it alone. */
export const adds = (ev, selecting) => selecting || Boolean(ev && (ev.shiftKey || ev.ctrlKey || ev.metaKey));
