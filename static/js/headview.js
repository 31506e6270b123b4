// The head view: from one token to what it reads, in every head of one layer at once.
// "lines" is bertviz's head view (query tokens left, key tokens right, one colour per
// head, a line's opacity = its weight); "bars" gives the same numbers as bar lengths.
//
// Reusable: it needs only token labels and weight rows, so the toy explorer and a real
// model's page (one layer at a time) can both use it:
//
//   drawHeadView(container, { queries, keys, query, rows }, { onSelect })
//
// queries: labels of the attending tokens (rows of the weights); keys: labels of the
// tokens attended to (columns); query: the chosen row; rows[h][j]: head h's weight from
// the chosen token to key j (null, a masked cell, counts as 0). Every label is set with
// textContent, never parsed as markup.

import { el } from "./dom.js";
import { svgEl as svg } from "./quick-svg.js";

// Okabe & Ito's palette, the usual choice for colour-vision deficiencies, strongest
// colours first; heads past the eighth reuse it with dashed lines (bars: striped).
export const HEAD_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];

export const headColour = (h) => HEAD_COLOURS[h % HEAD_COLOURS.length];
export const headDashed = (h) => h >= HEAD_COLOURS.length;
export const headName = (h) => `head ${h + 1}`;

const ROW_PX = 22;
const MODES = [
  ["lines", "lines"],
  ["bars", "bars"],
];
const MAX_WIDTH = 640;

const weightOf = (v) => (v === null || v === undefined || !Number.isFinite(v) ? 0 : v);

/** The strongest key of each head: [{head, key, weight}], in head order. */
export function strongestKeys(rows) {
  return rows.map((row, head) => {
    let key = 0;
    row.forEach((v, j) => {
      if (weightOf(v) > weightOf(row[key])) key = j;
    });
    return { head, key, weight: weightOf(row[key]) };
  });
}

function buildToolbar(container, id, onSelect, onMode) {
  const select = el("select", { id: `${id}-query`, "data-testid": "headview-query" });
  select.addEventListener("change", () => onSelect(Number(select.value)));
  const modes = el("div", { class: "hv-modes", role: "radiogroup", "aria-label": "Show as" },
    MODES.map(([value, text]) =>
      el("label", {}, [
        el("input", { type: "radio", name: `${id}-mode`, value, "data-testid": `headview-mode-${value}` }),
        ` ${text}`,
      ]),
    ),
  );
  modes.addEventListener("change", (ev) => {
    container.dataset.mode = ev.target.value;
    onMode(ev.target.value);
  });
  const legend = el("ul", { class: "hv-legend", "data-testid": "headview-legend", "aria-label": "Heads shown" });
  legend.addEventListener("change", () => onMode(container.dataset.mode));
  // Nearly uniform rows (weights ~1/T) draw nearly invisible lines: let the reader stretch them.
  const fit = el("input", { type: "checkbox", id: `${id}-fit`, "data-testid": "headview-fit" });
  fit.addEventListener("change", () => onMode(container.dataset.mode));
  container.append(
    el("div", { class: "hv-toolbar" }, [
      el("label", { for: `${id}-query`, text: "From token" }),
      select,
      modes,
      el("span", { class: "hv-fit" }, [fit, el("label", { for: `${id}-fit`, text: " darkest line = largest weight" })]),
    ]),
    legend,
    el("p", { class: "hv-summary", "data-testid": "headview-summary", "aria-live": "polite" }),
    el("div", { class: "hv-figure", "data-testid": "headview-figure" }),
  );
}

function syncLegend(legend, heads) {
  if (legend.children.length === heads) return;
  legend.replaceChildren(
    ...Array.from({ length: heads }, (_, h) =>
      el("li", {}, [
        el("label", {}, [
          el("input", { type: "checkbox", checked: true, "data-head": h, "data-testid": "headview-head" }),
          el("span", {
            class: `hv-swatch${headDashed(h) ? " dashed" : ""}`,
            style: `--hv-colour: ${headColour(h)}`,
            "aria-hidden": "true",
          }),
          ` ${headName(h)}`,
        ]),
      ]),
    ),
  );
}

function linesFigure({ queries, keys, query, rows }, visible, onSelect, { fitted, room }) {
  const g = linesGeometry(queries, keys, room);
  const root = svg("svg", {
    viewBox: `0 0 ${g.width} ${g.height}`,
    width: g.width,
    height: g.height,
    role: "img",
    class: "hv-lines",
    "data-testid": "headview-lines",
  });
  root.append(svg("title", {}, `Attention from ${queries[query]} to every token, one line colour per head`));
  const shown = rows.map((_, h) => h).filter((h) => visible[h]);
  root.append(headLines(g, { queries, keys, query, rows }, shown, fitted));
  root.append(...queryLabels(g, queries, query, onSelect), ...keys.map((token, j) => svg("text", { x: g.x1 + 6, y: g.yOf(j), "dominant-baseline": "middle", class: "hv-token hv-key" }, token)));
  return root;
}

/** The figure's size, the x of the query and key columns, and each row's y. */
function linesGeometry(queries, keys, room) {
  const height = Math.max(queries.length, keys.length) * ROW_PX + 8;
  const longest = Math.max(...[...queries, ...keys].map((t) => Math.min(Array.from(t).length, 18)), 3);
  const labelW = 12 + longest * 7.2;
  const width = Math.max(2 * labelW + 120, Math.min(room || 0, MAX_WIDTH), 360);
  return { width, height, x0: labelW, x1: width - labelW, yOf: (i) => 4 + i * ROW_PX + ROW_PX / 2 };
}

/** One line per shown head and key, from the chosen query; opacity = weight, or, fitted, weight / the largest weight shown. */
function headLines(g, { queries, keys, query, rows }, shown, fitted) {
  const top = fitted ? Math.max(...shown.flatMap((h) => rows[h].map(weightOf)), 1e-12) : 1;
  // Each head's line ends a little apart, so overlapping heads stay visible.
  const spread = Math.min(2.5, (ROW_PX - 6) / Math.max(shown.length, 1));
  const lines = svg("g", { class: "hv-line-group" });
  shown.forEach((h, rank) => {
    const dy = (rank - (shown.length - 1) / 2) * spread;
    rows[h].forEach((v, j) => {
      const w = weightOf(v);
      const line = svg("line", {
        x1: g.x0 + 4,
        y1: g.yOf(query) + dy,
        x2: g.x1 - 4,
        y2: g.yOf(j) + dy,
        stroke: headColour(h),
        "stroke-width": 2.5,
        "stroke-opacity": (w / top).toFixed(4),
        "data-head": h,
        "data-key": j,
        "data-weight": w,
      });
      if (headDashed(h)) line.setAttribute("stroke-dasharray", "6 3");
      line.append(svg("title", {}, `${headName(h)}: ${queries[query]} → ${keys[j]} ${w.toFixed(3)}`));
      lines.append(line);
    });
  });
  return lines;
}

/** The query tokens on the left, the chosen one marked; a click chooses another. */
function queryLabels(g, queries, query, onSelect) {
  return queries.map((token, i) => {
    const label = svg("text", {
      x: g.x0 - 6,
      y: g.yOf(i),
      "text-anchor": "end",
      "dominant-baseline": "middle",
      class: `hv-token hv-query${i === query ? " chosen" : ""}`,
      "data-index": i,
    }, token);
    label.addEventListener("click", () => onSelect(i));
    return label;
  });
}

function barsFigure({ keys, rows }, visible) {
  const shown = rows.map((_, h) => h).filter((h) => visible[h]);
  return el("table", { class: "hv-bars", "data-testid": "headview-bars" }, [
    el("thead", {}, el("tr", {}, [el("th", { scope: "col", text: "token read" }), el("th", { scope: "col", text: "weight in each head" })])),
    el("tbody", {}, keys.map((token, j) =>
      el("tr", {}, [
        el("th", { scope: "row", class: "hv-token", text: token }),
        el("td", {}, shown.map((h) => {
          const w = weightOf(rows[h][j]);
          return el("div", { class: "hv-bar-row" }, [
            el("span", { class: "hv-bar-name", text: `h${h + 1}` }),
            el("span", { class: "hv-bar-track" }, el("span", {
              class: `hv-bar${headDashed(h) ? " dashed" : ""}`,
              style: `width: ${(100 * w).toFixed(2)}%; --hv-colour: ${headColour(h)}`,
              "data-head": h,
              "data-key": j,
              "data-weight": w,
            })),
            el("span", { class: "hv-bar-value", text: w.toFixed(3) }),
          ]);
        })),
      ]),
    )),
  ]);
}

/**
 * Draw (or redraw) the head view in `container`. data: {queries, keys, query, rows};
 * options: {onSelect(i) when another query token is chosen here, mode: "lines" | "bars"
 * at first, onMode(mode) when the reader switches}. Returns the container.
 */
export function drawHeadView(container, data, options = {}) {
  const onSelect = options.onSelect || (() => {});
  const onModeOut = options.onMode || (() => {});
  if (!container.dataset.hvBuilt) {
    container.dataset.hvBuilt = "1";
    container.classList.add("headview");
    container.dataset.mode = options.mode === "bars" ? "bars" : "lines";
    const id = container.id || `hv${Math.random().toString(36).slice(2, 8)}`;
    buildToolbar(container, id, (i) => container._hvSelect(i), (mode) => container._hvRedraw(mode));
  }
  container._hvData = data;
  container._hvSelect = onSelect;
  container._hvRedraw = (mode) => {
    if (mode !== undefined) onModeOut(mode);
    render(container);
  };
  const select = container.querySelector("[data-testid='headview-query']");
  const labels = data.queries;
  if (select.options.length !== labels.length || [...select.options].some((o, i) => o.textContent !== labels[i])) {
    select.replaceChildren(...labels.map((t, i) => el("option", { value: i, text: t })));
  }
  select.value = String(data.query);
  for (const radio of container.querySelectorAll("input[type=radio]")) radio.checked = radio.value === container.dataset.mode;
  syncLegend(container.querySelector(".hv-legend"), data.rows.length);
  render(container);
  return container;
}

function render(container) {
  const data = container._hvData;
  const visible = [...container.querySelectorAll("[data-testid='headview-head']")].map((c) => c.checked);
  const figure = container.querySelector(".hv-figure");
  const fitted = container.querySelector("[data-testid='headview-fit']").checked;
  figure.replaceChildren(
    container.dataset.mode === "bars"
      ? barsFigure(data, visible)
      : linesFigure(data, visible, (i) => container._hvSelect(i), { fitted, room: figure.clientWidth }),
  );
  const strongest = strongestKeys(data.rows).filter(({ head }) => visible[head]);
  const summary = container.querySelector(".hv-summary");
  summary.replaceChildren(
    el("strong", { text: data.queries[data.query] }),
    strongest.length ? " reads most from: " : " (no head shown)",
    ...strongest.flatMap(({ head, key, weight }, n) => [
      n ? "; " : "",
      `${headName(head)} → `,
      el("span", { class: "hv-token", text: data.keys[key] }),
      ` ${weightText(weight)}`,
    ]),
  );
  if (container.dataset.mode !== "bars") scrollToChosen(figure);
}

/** A weight with two significant digits at least: 0.42, 0.0042 (never a bare 0.00). */
export function weightText(w) {
  return w >= 0.01 || w === 0 ? w.toFixed(2) : w.toPrecision(2);
}

/** The lines box scrolled so the chosen token's label (and its lines' start) is in the middle. */
function scrollToChosen(figure) {
  const chosen = figure.querySelector(".hv-query.chosen");
  if (!chosen || figure.scrollHeight <= figure.clientHeight) return;
  const box = figure.getBoundingClientRect();
  const at = chosen.getBoundingClientRect();
  figure.scrollTop += at.top + at.height / 2 - (box.top + figure.clientHeight / 2);
}
