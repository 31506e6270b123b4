// Token labels for Plotly. Plotly reads a few HTML-like tags in labels and hover
// text, so untrusted token text is escaped to entities, which it shows literally.

const MAX_LABEL = 40;

export function escapePlotly(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function shorten(text) {
  const chars = Array.from(String(text));
  return chars.length > MAX_LABEL ? chars.slice(0, MAX_LABEL - 1).join("") + "…" : chars.join("");
}

/**
 * A token as every page shows it (chips, axis labels): line breaks, tabs and other
 * control characters as visible marks, and a token of spaces only (a character-level
 * model's " ") as "␣" per space, so no chip or label is blank.
 */
export function visibleToken(token) {
  const t = String(token)
    .replace(/\n/g, "↵")
    .replace(/\t/g, "⇥")
    .replace(/[\u0000-\u001f]/g, (c) => String.fromCharCode(0x2400 + c.charCodeAt(0)));
  return t !== "" && t.trim() === "" ? t.replace(/\s/g, "␣") : t;
}

/** One plain-text label per position; repeated tokens get their position ("the·0", "␣·6"). */
export function tokenLabels(tokens) {
  const counts = new Map();
  for (const t of tokens) counts.set(t, (counts.get(t) || 0) + 1);
  return tokens.map((t, i) => {
    const shown = shorten(visibleToken(t));
    return counts.get(t) > 1 ? `${shown}·${i}` : shown;
  });
}

/** A short axis tick for a label: at most `max` characters, keeping a "·3" position suffix. */
export function tickLabel(label, max = 14) {
  const chars = Array.from(String(label));
  if (chars.length <= max) return chars.join("");
  const suffix = (String(label).match(/·\d+$/) || [""])[0];
  return chars.slice(0, max - 1 - suffix.length).join("") + "…" + suffix;
}

/** "1 layer", "4 layers": a count and its noun, plural when it is not one. */
export function countOf(n, noun) {
  return `${Number(n).toLocaleString("en")} ${noun}${n === 1 ? "" : "s"}`;
}

export function dimLabels(n, prefix = "d") {
  return Array.from({ length: n }, (_, i) => `${prefix}${i}`);
}
