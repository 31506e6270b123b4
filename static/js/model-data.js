// The real-model API and its compact wire format.
// A compact tensor is {shape, data (base64), dtype, decode, ...}: uint8 means
// value = byte / 255 (error <= 1/510); float16 is IEEE binary16, little-endian.

import { ApiError, post } from "./api.js";

// /api/model, /api/model/attention and /api/model/generate are called from model-worker.js.
export const modelApi = {
  compareWord: (body) => post("/api/model/compare-word", body),
  head: (body) => post("/api/model/head", body),
  embeddings: (body) => post("/api/model/embeddings", body),
};

function base64Bytes(data) {
  const binary = atob(data);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// binary16 -> float (a lookup table, built on first use).
let F16 = null;

function halfTable() {
  if (F16) return F16;
  F16 = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) F16[h] = sign * 2 ** -14 * (frac / 1024);
    else if (exp === 31) F16[h] = frac ? NaN : sign * Infinity;
    else F16[h] = sign * 2 ** (exp - 15) * (1 + frac / 1024);
  }
  return F16;
}

/** A compact tensor as {shape, values: Float32Array} (C order). */
export function decodeCompact(tensor) {
  const bytes = base64Bytes(tensor.data);
  const count = tensor.shape.reduce((a, b) => a * b, 1);
  const values = new Float32Array(count);
  if (tensor.dtype === "uint8") {
    for (let i = 0; i < count; i++) values[i] = bytes[i] / 255;
  } else if (tensor.dtype === "float16") {
    const table = halfTable();
    const halves = new DataView(bytes.buffer);
    for (let i = 0; i < count; i++) values[i] = table[halves.getUint16(2 * i, true)];
  } else {
    throw new Error(`unknown compact dtype ${tensor.dtype}`);
  }
  return { shape: tensor.shape, values, maxError: tensor.max_abs_error };
}

/** One T × T map out of a decoded (H, T, T) or (T, T) tensor, as a Float32Array view. */
export function mapView(decoded, head = 0) {
  const T = decoded.shape[decoded.shape.length - 1];
  return decoded.values.subarray(head * T * T, (head + 1) * T * T);
}

/** A T × T view as nested plain arrays (what Plotly and the tests read). */
export function toRows(flat, T) {
  const rows = new Array(T);
  for (let i = 0; i < T; i++) rows[i] = Array.from(flat.subarray(i * T, (i + 1) * T));
  return rows;
}

/**
 * Fetch every layer, compact uint8, in a worker (model-worker.js), so that the
 * requests and the decoding go on while the main thread is busy (parsing
 * plotly.min.js, drawing).  Layer 1 first; as soon as its answer starts (the
 * server has run the forward pass and cached it) the other layers in parallel,
 * one request each.  A generation is one request (it cannot be repeated layer
 * by layer without writing again), decoded layer by layer all the same.
 *
 * Callbacks, all skipped once isCurrent() is false: onInfo(/api/model?model=…)
 * before anything else, onMeta(first answer without its maps: tokens,
 * positions, generated flags…) and onLayer(n, {heads, average, rollout}) as
 * each layer arrives (decoded as {shape, values: Float32Array}), onProgress({stage,
 * done, total, elapsed_s, eta_s}) as the server runs the model.  Resolves when every
 * layer has arrived.  Starting a job cancels the older ones still running (their
 * requests are aborted, which stops their passes on the server).
 */
let worker = null;
let nextId = 0;
const pending = new Map();

function getWorker() {
  if (worker) return worker;
  worker = new Worker(new URL("./model-worker.js", import.meta.url), { type: "module" });
  worker.addEventListener("message", (ev) => {
    const job = pending.get(ev.data.id);
    if (job) job(ev.data);
  });
  worker.addEventListener("error", (ev) => {
    for (const job of pending.values()) job({ type: "error", status: 0, detail: `the worker failed: ${ev.message}` });
  });
  return worker;
}

function runJob(kind, body, { isCurrent, onInfo, onMeta, onLayer, onProgress = () => {} }) {
  // A newer request cancels the older ones: their connections close, their passes stop.
  for (const older of pending.keys()) getWorker().postMessage({ id: older, kind: "cancel" });
  const id = ++nextId;
  return new Promise((resolve, reject) => {
    pending.set(id, (msg) => {
      if (msg.t && (msg.type === "meta" || msg.type === "done")) {
        // When the worker had the first layer / all layers (the main thread may be busy).
        performance.mark(`model-worker-${msg.type}`, { startTime: msg.t - performance.timeOrigin });
      }
      if (msg.type === "error" || msg.type === "done") pending.delete(id);
      if (msg.type === "error") return reject(new ApiError(msg.status, msg.detail));
      if (msg.type === "done") return resolve();
      if (!isCurrent()) return;
      if (msg.type === "info") onInfo(msg.info);
      else if (msg.type === "progress") onProgress(msg.progress);
      else if (msg.type === "meta") onMeta(msg.meta);
      else if (msg.type === "layer") onLayer(msg.n, msg.data);
    });
    getWorker().postMessage({ id, kind, body });
  });
}

/** Every layer of one text's attention (see above). */
export function fetchLayers({ model, text, textB, hideSpecial, measure = "weights", ...callbacks }) {
  const body = { text, hide_special: hideSpecial, format: "compact", dtype: "uint8" };
  if (measure !== "weights") body.measure = measure;
  if (model) body.model = model;
  if (textB) body.text_b = textB;
  return runJob("attention", body, callbacks);
}

/** A generation and the attention over prompt and generated tokens (see above). */
export function generateLayers({ model, prompt, maxNew, temperature, topK, seed, hideSpecial, ...callbacks }) {
  const body = { prompt, max_new_tokens: maxNew, hide_special: hideSpecial, format: "compact", dtype: "uint8" };
  if (model) body.model = model;
  if (temperature) body.temperature = temperature;
  if (topK !== null && topK !== undefined) body.top_k = topK;
  if (seed !== null && seed !== undefined) body.seed = seed;
  return runJob("generate", body, callbacks);
}
