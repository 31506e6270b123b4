// Saving what /model shows: the large map as drawn (PNG, SVG), and the maps of the text
// shown (every layer's heads, their mean and the rollout) as NumPy's .npz or as the
// API's JSON.  The maps are asked for again as JSON floats, so a file holds the API's
// numbers, not the page's 8-bit copies.

import { errorText, post } from "./api.js";
import { el } from "./dom.js";
import { float32Array, npz, unicodeArray } from "./npz.js";
import { plotlyReady } from "./plotly-loader.js";

/** Offer a Blob (or a data: URL) for download under `filename`. */
function save(filename, blob) {
  const url = typeof blob === "string" ? blob : URL.createObjectURL(blob);
  const link = el("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  if (typeof blob !== "string") setTimeout(() => URL.revokeObjectURL(url), 0);
}

const slug = (text) => text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "map";
const escapeXml = (text) => text.replace(/[<>&"]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;" })[c]);

/** An SVG of a canvas map as drawn: its pixels (an embedded PNG), the axis titles and the colour scale. */
function canvasSvg(canvas, title, bar) {
  const scale = Math.max(1, Math.ceil(480 / Math.max(canvas.width, canvas.height)));
  const w = canvas.width * scale;
  const h = canvas.height * scale;
  const colours = bar ? `${bar.getAttribute("aria-label") || ""}` : "";
  const lines = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w + 60}" height="${h + 90}" viewBox="0 0 ${w + 60} ${h + 90}" font-family="sans-serif" font-size="12">`,
    `<text x="40" y="16" font-weight="600">${escapeXml(title)}</text>`,
    `<image x="40" y="26" width="${w}" height="${h}" style="image-rendering: pixelated" href="${canvas.toDataURL("image/png")}"/>`,
    `<text x="${40 + w / 2}" y="${h + 44}" text-anchor="middle">attended to (key) →</text>`,
    `<text transform="translate(24 ${26 + h / 2}) rotate(-90)" text-anchor="middle">attends (query) ↓</text>`,
    `<text x="40" y="${h + 66}">${escapeXml(colours)}</text>`,
    "</svg>",
  ];
  return new Blob([lines.join("\n")], { type: "image/svg+xml" });
}

/** The maps' arrays for numpy: tokens, layers, attentions (L, H, T, T), head_average, rollout. */
function mapArrays(answer) {
  const arrays = {
    tokens: unicodeArray(answer.tokens),
    layers: { descr: "<i4", shape: [answer.layers.length], data: Int32Array.from(answer.layers) },
    attentions: float32Array(answer.attentions),
  };
  if (answer.head_average) arrays.head_average = float32Array(answer.head_average);
  if (answer.rollout) arrays.rollout = float32Array(answer.rollout);
  return arrays;
}

/** The file name of the large map's image: its title, slugged. */
const imageName = (zoom) => `attention-${slug(zoom.title())}`;

/** Save the large map as drawn: the long text's canvas as is, else Plotly's image of its plot. */
async function saveImage(x, format) {
  const { status, zoom } = x;
  status.textContent = "";
  const canvas = zoom.canvas();
  if (canvas) {
    if (format === "png") canvas.toBlob((blob) => save(`${imageName(zoom)}.png`, blob), "image/png");
    else save(`${imageName(zoom)}.svg`, canvasSvg(canvas, zoom.title(), zoom.bar()));
    return;
  }
  const plot = zoom.plot();
  if (!plot || !plot.data) return void (status.textContent = "Open a map first.");
  try {
    const Plotly = await plotlyReady();
    const { width, height } = plot.getBoundingClientRect();
    const url = await Plotly.toImage({ data: plot.data, layout: plot.layout }, { format, width: Math.round(width), height: Math.round(height) });
    save(`${imageName(zoom)}.${format}`, url);
  } catch (err) {
    status.textContent = `The image could not be made: ${err.message || err}`;
  }
}

/** Save the text's maps (kind: "npz" | "json"), asked for again as the API's JSON floats. */
async function saveMaps(x, kind) {
  const { status } = x;
  const body = x.request();
  if (!body) return void (status.textContent = "The maps of a written text can be saved; those of generation cannot yet.");
  status.textContent = "Asking for the maps…";
  try {
    const answer = await post("/api/model/attention", { ...body, format: "json" });
    const file = `attention-${slug(answer.model || "model")}-maps`;
    if (kind === "json") save(`${file}.json`, new Blob([JSON.stringify(answer)], { type: "application/json" }));
    else save(`${file}.npz`, npz(mapArrays(answer)));
    status.textContent = `Saved ${answer.layers.length} layers × ${answer.tokens.length} tokens.`;
  } catch (err) {
    status.textContent = errorText(err);
  }
}

/** The bar's buttons: the map as PNG or SVG, the text's maps as .npz or JSON. */
function exportBar(x) {
  const button = (id, text, onclick) => el("button", { type: "button", class: "secondary", "data-testid": `export-${id}`, text, onclick });
  return el("div", { class: "export-bar", "data-testid": "export-bar" }, [
    el("span", { text: "Save this map:" }),
    button("png", "PNG", () => saveImage(x, "png")),
    button("svg", "SVG", () => saveImage(x, "svg")),
    el("span", { text: "The text's maps:" }),
    button("npz", ".npz", () => saveMaps(x, "npz")),
    button("json", "JSON", () => saveMaps(x, "json")),
  ]);
}

/**
 * The export bar, after `after` (the large map's readout).  request() gives the body the
 * maps shown came from (null when there is none: generation); zoom: {canvas (the long
 * text's canvas or null when hidden), plot (the Plotly div), title, bar}.
 */
export function mountExport(after, { request, zoom }) {
  const x = { request, zoom, status: el("p", { class: "hint", "data-testid": "export-status", role: "status" }) };
  const bar = exportBar(x);
  after.after(bar, x.status);
  return bar;
}
