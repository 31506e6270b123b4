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

/** Why `heads` cannot split a query/key width, and which head counts can. */
export function headsAdvice(width, heads, maxHeads = 16) {
  return `${heads} heads cannot split a query/key width of ${width} evenly: choose ${orList(divisorsUpTo(width, maxHeads))} heads, or change d_out.`;
}

// Pydantic's and the server's wording, as a reader would put it. `label` names the control.
const RULES = [
  [/^Input should be greater than or equal to (\S+)$/, (l, [n]) => `${l} must be at least ${fmtNumber(n)}.`],
  [/^Input should be greater than (\S+)$/, (l, [n]) => `${l} must be more than ${fmtNumber(n)}.`],
  [/^Input should be less than or equal to (\S+)$/, (l, [n]) => `${l} must be at most ${fmtNumber(n)}.`],
  [/^Input should be less than (\S+)$/, (l, [n]) => `${l} must be less than ${fmtNumber(n)}.`],
  [/^Input should be a valid integer/, (l) => `${l} must be a whole number.`],
  [/^Input should be a valid (number|float)/, (l) => `${l} must be a number.`],
  [/^Input should be a finite number/, (l) => `${l} must be a finite number between −1,000,000 and 1,000,000.`],
  [/^Input should be a valid boolean/, (l) => `${l} must be on or off.`],
  [/^Input should be a valid (list|array)/, (l) => `${l} must be a list.`],
  [/^Input should be (.+)$/, (l, [what]) => `${l} must be ${what.replace(/'([^']*)'/g, "“$1”")}.`],
  [/^Field required$/, (l) => `${l} is missing.`],
  [/^String should have at least 1 character/, (l) => `${l} cannot be empty.`],
  [/^List should have at least (\d+) items?/, (l, [n]) => `${l} needs at least ${n}.`],
  [/^Extra inputs are not permitted$/, (l) => `${l} is not something this server knows.`],
  [
    /^the query\/key width \((\d+)\) is not a multiple of the number of heads \((\d+)\)$/,
    (l, [width, heads], ctx) => headsAdvice(Number(width), Number(heads), ctx.maxHeads),
  ],
  [
    /^(.+?) is (\d+); the limit is (\d+) \((ATTENTION_VIZ_\w+)\)$/,
    (l, [, found, limit, env]) => `${l}: ${fmtNumber(found)} is more than this server takes (at most ${fmtNumber(limit)}; ${env}).`,
  ],
];

/** One error item ({loc, msg}) in plain words; `label` names the control it belongs to. */
export function plainMessage(item, label = "This value", ctx = {}) {
  const msg = String(item.msg || "").trim();
  for (const [pattern, say] of RULES) {
    const m = msg.match(pattern);
    if (m) return say(label, m.slice(1), ctx);
  }
  return /[.!?]$/.test(msg) ? msg : `${msg}.`;
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
export function showFieldErrors(root, error, where, ctx = {}) {
  clearFieldErrors(root);
  const items = error instanceof ApiError ? error.detail : [{ loc: [], msg: String(error.message || error) }];
  const shown = [];
  for (const item of items) {
    const path = fieldPath(item);
    const { key = "general", label } = where(path) || {};
    const text = label ? plainMessage(item, label, ctx) : plainMessage(item, undefined, ctx);
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
