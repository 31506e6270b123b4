// What a reader is told when something cannot be computed: each error beside the
// control that caused it, in plain words, and the plots it leaves behind marked stale.
//
// Markup the pages provide: an error box <p class="error" data-error-for="KEY"
// id="error-KEY"> next to each control, and the control names it in aria-describedby;
// a "general" box catches errors that belong to no control.

import { ApiError } from "./api.js";

const fmtNumber = (s) => {
  const n = Number(s);
  return Number.isFinite(n) ? n.toLocaleString("en-US", { maximumFractionDigits: 6 }) : s;
};

const divisorsUpTo = (n, max) => Array.from({ length: Math.min(n, max) }, (_, i) => i + 1).filter((d) => n % d === 0);
const orList = (xs) => (xs.length <= 1 ? xs.join("") : `${xs.slice(0, -1).join(", ")} or ${xs[xs.length - 1]}`);

/** Why `heads` cannot split a width (the query/key width, or a page's `widthName`), and
 * which head counts can. */
export function headsAdvice(width, heads, maxHeads = 16, widthName = "query/key width", change = "d_out") {
  return `${heads} heads cannot split ${widthName === "query/key width" ? "a query/key width" : widthName} of ${width} evenly: choose ${orList(divisorsUpTo(width, maxHeads))} heads, or change ${change}.`;
}

const quoted = (text) => String(text).replace(/'([^']*)'/g, "“$1”");
const inWords = (l, text) => `${l} must be ${quoted(text)}.`;

/** What sets a limit, for a reader: the server's setting, or the model itself. */
function limitWords(label, { limit, found, setting }) {
  if (setting === "model_context") return `${label}: ${fmtNumber(found)} is more than this model reads (at most ${fmtNumber(limit)}).`;
  if (String(setting).startsWith("ATTENTION_VIZ_")) {
    return `${label}: ${fmtNumber(found)} is more than this server takes (at most ${fmtNumber(limit)}; ${setting}).`;
  }
  return `${label}: ${fmtNumber(found)} is more than ${setting} allows (at most ${fmtNumber(limit)}).`;
}

// Each error's stable type (pydantic's, or the server's own: app/errors.py) and its
// ctx, as a reader would put them; `label` names the control. The sentence (msg) is
// shown as it is only for a type not listed here: it is never parsed.
const WORDS = {
  greater_than_equal: (l, c) => `${l} must be at least ${fmtNumber(c.ge)}.`,
  greater_than: (l, c) => `${l} must be more than ${fmtNumber(c.gt)}.`,
  less_than_equal: (l, c) => `${l} must be at most ${fmtNumber(c.le)}.`,
  less_than: (l, c) => `${l} must be less than ${fmtNumber(c.lt)}.`,
  int_type: (l) => `${l} must be a whole number.`,
  int_parsing: (l) => `${l} must be a whole number.`,
  int_from_float: (l) => `${l} must be a whole number.`,
  float_type: (l) => `${l} must be a number.`,
  float_parsing: (l) => `${l} must be a number.`,
  finite_number: (l) => `${l} must be a finite number between −1,000,000 and 1,000,000.`,
  bool_type: (l) => `${l} must be on or off.`,
  bool_parsing: (l) => `${l} must be on or off.`,
  list_type: (l) => `${l} must be a list.`,
  literal_error: (l, c) => inWords(l, c.expected),
  enum: (l, c) => inWords(l, c.expected),
  missing: (l) => `${l} is missing.`,
  string_too_short: (l) => `${l} cannot be empty.`,
  too_short: (l, c) => `${l} needs at least ${c.min_length}.`,
  extra_forbidden: (l) => `${l} is not something this server knows.`,
  heads_indivisible: (l, c, page) => headsAdvice(Number(c.width), Number(c.heads), page.maxHeads, page.widthName, page.widthName),
  limit_exceeded: (l, c) => limitWords(l, c),
};

/** One error item ({loc, msg, type, ctx}) in plain words; `label` names the control it
 * belongs to. An item already worded (model-errors.js) is shown as it is. */
export function plainMessage(item, label = "This value", page = {}) {
  const say = !item.worded && WORDS[item.type];
  if (say) return say(label, item.ctx || {}, page);
  const msg = String(item.msg || "").trim();
  return ".!?".includes(msg.slice(-1)) ? msg : `${msg}.`;
}

/** The loc without its "body"/"query" prefix: ["num_heads"], ["embedding", "vectors", 0, 1]. */
export const fieldPath = (item) => (item.loc || []).filter((p, i) => !(i === 0 && (p === "body" || p === "query")));

export function clearFieldErrors(root) {
  for (const box of root.querySelectorAll("[data-error-for]")) box.textContent = "";
  for (const c of root.querySelectorAll("[aria-invalid]")) c.removeAttribute("aria-invalid");
}

/** Write `text` into the error box of `key` (or "general") and mark its control invalid. */
export function showFieldError(root, key, text) {
  const box = root.querySelector(`[data-error-for="${CSS.escape(key)}"]`) || root.querySelector('[data-error-for="general"]');
  if (!box) return null;
  box.textContent = box.textContent ? `${box.textContent} ${text}` : text;
  if (box.id) {
    for (const control of root.querySelectorAll(`[aria-describedby~="${CSS.escape(box.id)}"]`)) {
      control.setAttribute("aria-invalid", "true");
    }
  }
  return box;
}

/**
 * Show every error of `error` (an ApiError or any Error) beside its control.
 * where(path) -> {key, label} names the error box and the words for the control;
 * returns the messages shown, in order.
 */
export function showFieldErrors(root, error, where, page = {}) {
  clearFieldErrors(root);
  const items = error instanceof ApiError ? error.detail : [{ loc: [], msg: String(error.message || error) }];
  const shown = [];
  for (const item of items) {
    const path = fieldPath(item);
    const { key = "general", label } = where(path) || {};
    const text = label ? plainMessage(item, label, page) : plainMessage(item, undefined, page);
    showFieldError(root, key, text);
    shown.push(text);
  }
  return shown;
}

/**
 * Mark the plots in `region` as out of date (dimmed, and said in `note`, which the
 * region names in aria-describedby), or current again when reason is null.
 */
export function markStale(region, note, reason) {
  if (!region) return;
  if (reason === null) {
    delete region.dataset.stale;
    region.removeAttribute("aria-describedby");
    if (note) {
      note.hidden = true;
      note.textContent = "";
    }
    return;
  }
  region.dataset.stale = "true";
  if (note) {
    note.hidden = false;
    note.textContent = `Out of date: these plots still show the last settings that could be computed. ${reason}`.trim();
    if (note.id) region.setAttribute("aria-describedby", note.id);
  }
}
