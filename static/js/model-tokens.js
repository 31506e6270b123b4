// The model page's token list: one button per token shown (special, segment B,
// WordPiece continuation, written by the model, [UNK]), what a generation wrote,
// and the notice that names the words an encoder's vocabulary lacks.

import { el } from "./dom.js";
import { visibleToken } from "./labels.js";
import { quoted } from "./explorer-notices.js";
import { modelApi } from "./model-data.js";
import { UNKNOWN_PIECE, wordsWithUnknownPieces } from "./model-vectors.js";

// The unknown token of WordPiece vocabularies and of SentencePiece ones (Llama-family
// tokenizers without byte fallback): what a text's missing characters become.
const UNKNOWN_TOKENS = new Set([UNKNOWN_PIECE, "<unk>"]);
export const isUnknown = (t) => UNKNOWN_TOKENS.has(t);

// A long text's list is shown a page at a time (a few hundred chips, not thousands in
// the DOM): past PAGED_FROM tokens, pages of TOKEN_PAGE, the chosen token's page shown.
export const PAGED_FROM = 512;
export const TOKEN_PAGE = 256;

function tokenButton(meta, i, chosen, onChoose) {
  const token = meta.tokens[i];
  const position = meta.positions[i];
  const generated = Boolean(meta.generated && meta.generated[i]);
  const classes = [
    "wp-token",
    meta.special[position] ? "special" : "",
    meta.token_type_ids[i] === 1 ? "seg-b" : "",
    token.startsWith("##") ? "piece" : "",
    generated ? "generated" : "",
    isUnknown(token) ? "unk" : "",
  ];
  const button = el("button", {
    type: "button",
    class: classes.filter(Boolean).join(" "),
    "data-testid": "wp-token",
    "data-index": i,
    "aria-pressed": String(i === chosen),
    title: `token ${i + 1} · position ${position}${generated ? " · written by the model" : ""}${isUnknown(token) ? " · not in the vocabulary" : ""}`,
    text: visibleToken(token),
    onclick: (ev) => onChoose(i, ev), // the event: shift/ctrl adds to a selection
  });
  if (generated) button.setAttribute("aria-label", `${token} (written by the model)`);
  return el("li", {}, button);
}

/** The pager above a long list (made once): previous, "tokens a–b of n", next, go to token. */
function pagerOf(list) {
  if (list._pager) return list._pager;
  const label = el("span", { "data-testid": "token-page", role: "status" });
  const previous = el("button", { type: "button", "data-testid": "token-page-previous", text: "◀ previous", "aria-label": "previous tokens" });
  const next = el("button", { type: "button", "data-testid": "token-page-next", text: "next ▶", "aria-label": "next tokens" });
  const go = el("input", { type: "number", min: 1, step: 1, id: "token-go", "data-testid": "token-go", inputmode: "numeric" });
  const pager = el("div", { class: "token-pager", "data-testid": "token-pager", hidden: true }, [
    previous,
    label,
    next,
    el("label", { for: "token-go", text: "Token" }),
    go,
  ]);
  previous.addEventListener("click", () => showPage(list, list._view.first - TOKEN_PAGE));
  next.addEventListener("click", () => showPage(list, list._view.first + TOKEN_PAGE));
  go.addEventListener("change", () => {
    const n = Number(go.value);
    const { meta, onChoose } = list._view;
    if (Number.isInteger(n) && n >= 1 && n <= meta.tokens.length) onChoose(n - 1);
  });
  list.before(pager);
  list._pager = { pager, label, previous, next, go };
  return list._pager;
}

function showPage(list, first) {
  const view = list._view;
  const count = view.meta.tokens.length;
  const paged = count > PAGED_FROM;
  view.first = paged ? Math.min(Math.max(0, first), Math.floor((count - 1) / TOKEN_PAGE) * TOKEN_PAGE) : 0;
  view.last = paged ? Math.min(count, view.first + TOKEN_PAGE) : count;
  const items = [];
  for (let i = view.first; i < view.last; i++) items.push(tokenButton(view.meta, i, view.chosen, view.onChoose));
  list.replaceChildren(...items);
  list.start = view.first + 1;
  list.dataset.first = String(view.first);
  if (!paged) {
    if (list._pager) list._pager.pager.hidden = true;
    return;
  }
  const { pager, label, previous, next, go } = pagerOf(list);
  pager.hidden = false;
  label.textContent = `tokens ${(view.first + 1).toLocaleString("en")}–${view.last.toLocaleString("en")} of ${count.toLocaleString("en")}`;
  previous.disabled = view.first === 0;
  next.disabled = view.last === count;
  go.max = String(count);
}

/**
 * The tokens of `meta` (an attention or generation answer without its maps) as buttons,
 * a page of them for a long text.  chosen: index of the chosen token or null; onChoose(i)
 * when one is clicked.
 */
export function renderTokenList(list, meta, { chosen, onChoose }) {
  list._view = { meta, chosen, onChoose, first: 0, last: 0 };
  showPage(list, Math.floor((chosen ?? 0) / TOKEN_PAGE) * TOKEN_PAGE);
}

/** Press the chosen token's button only (rebuilding the list would take the focus away);
 * a token on another page of a long list shows its page. */
export function markChosenToken(list, chosen) {
  const view = list._view;
  if (!view) return;
  view.chosen = chosen;
  if (chosen < view.first || chosen >= view.last) {
    showPage(list, Math.floor(chosen / TOKEN_PAGE) * TOKEN_PAGE);
    return;
  }
  for (const b of list.querySelectorAll("[aria-pressed='true']")) b.setAttribute("aria-pressed", "false");
  list.querySelector(`[data-index='${chosen}']`)?.setAttribute("aria-pressed", "true");
}

const STOPS = { eos: "it wrote its end-of-text token", max_new_tokens: "it reached max new tokens" };

/** What a generation wrote, how, and why it stopped. */
export function renderGenerationSummary(box, meta) {
  box.hidden = !meta || !meta.generated_tokens;
  if (box.hidden) return box.replaceChildren();
  const count = meta.generated_tokens.length;
  const how =
    meta.temperature > 0
      ? `sampled at temperature ${meta.temperature}${meta.top_k ? `, top-k ${meta.top_k}` : ""}${meta.seed === null ? "" : `, seed ${meta.seed}`}`
      : "greedy: the most likely token each time";
  box.replaceChildren(
    el("span", { class: "gen-swatch", "aria-hidden": "true" }),
    ` The model wrote ${count} token${count === 1 ? "" : "s"} (${how}); it stopped because ${STOPS[meta.stop_reason] || meta.stop_reason}: `,
    el("q", { "data-testid": "gen-text", text: meta.generated_text }),
    ". Its tokens are marked ▸ and outlined in orange.",
  );
}

/**
 * A model turns what its vocabulary lacks (emoji, rarer scripts) into [UNK] (or <unk>):
 * say so beside the token list and, for an encoder (whose word pieces the server can
 * list: lookup), name the words.
 * texts: what was sent; limits: {max_vocabulary_words, max_token_chars}.
 * Resolves once the notice is final; `isCurrent()` false drops a late answer.
 */
export async function explainUnknown(box, { tokens, texts, model, modelName, limits, isCurrent, lookup = true }) {
  const unknown = tokens.filter(isUnknown);
  const count = unknown.length;
  box.hidden = count === 0;
  box.dataset.words = "";
  if (!count) return box.replaceChildren();
  box.replaceChildren(
    `${count} token${count === 1 ? " is" : "s are"} `,
    el("code", { text: unknown[0] }),
    `: ${modelName}'s vocabulary lacks some characters of the text (emoji, rarer scripts), and the model sees one unknown token there, the same for any character it lacks.`,
  );
  if (!lookup) return;
  const words = [...new Set(texts.join(" ").split(/\s+/).filter(Boolean))]
    .filter((w) => w.length <= (limits.max_token_chars || 64))
    .slice(0, limits.max_vocabulary_words || 256);
  if (!words.length) return;
  let answer;
  try {
    answer = await modelApi.embeddings({ model, words });
  } catch {
    return; // the count above stands without the words
  }
  if (!isCurrent()) return;
  const pieces = new Map(answer.words.map((w, i) => [w, answer.pieces[i]]));
  const lacking = wordsWithUnknownPieces(words, (w) => pieces.get(w));
  if (!lacking.length) return;
  box.dataset.words = lacking.join(" ");
  box.replaceChildren(
    `${modelName}'s vocabulary lacks `,
    ...quoted(lacking),
    ` (in whole or in part): ${lacking.length === 1 ? "it becomes" : "each becomes"} the token `,
    el("code", { text: UNKNOWN_PIECE }),
    ` (${count} in all), the same for any character the model lacks, so its attention says nothing about what was written there.`,
  );
}
