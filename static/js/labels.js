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

/** One plain-text label per position; repeated tokens get their position ("the·0", "the·6"). */
export function tokenLabels(tokens) {
  const counts = new Map();
  for (const t of tokens) counts.set(t, (counts.get(t) || 0) + 1);
  return tokens.map((t, i) => (counts.get(t) > 1 ? `${shorten(t)}·${i}` : shorten(t)));
}

/** A short axis tick for a label: at most `max` characters, keeping a "·3" position suffix. */
export function tickLabel(label, max = 14) {
  const chars = Array.from(String(label));
  if (chars.length <= max) return chars.join("");
  const suffix = (String(label).match(/·\d+$/) || [""])[0];
  return chars.slice(0, max - 1 - suffix.length).join("") + "…" + suffix;
}

export function dimLabels(n, prefix = "d") {
  return Array.from({ length: n }, (_, i) => `${prefix}${i}`);
}
