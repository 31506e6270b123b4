// Fetches and decodes a model's attention off the main thread (see fetchLayers and
// generateLayers in model-data.js).  Messages in: {id, kind: "attention" |
// "generate", body}, or {id, kind: "cancel"}.  Out: {id, type: "info" | "progress" |
// "meta" | "layer" | "done" | "error", ...}; decoded maps are transferred, not copied.
// The request that runs the model is streamed (…/stream: progress per layer, then the
// answer); cancelling a job aborts its requests, which stops its pass on the server.

import { ApiError, get, isAbort, post, stream } from "./api.js";
import { decodeCompact } from "./model-data.js";
import { gridPool, isPooled } from "./model-overview.js";

const URL_ATTENTION = "/api/model/attention";
const URL_GENERATE = "/api/model/generate";
const STREAM = "/stream";
// id -> the AbortController of that job's requests
const controllers = new Map();
const MAPS = ["attentions", "head_average", "rollout"];
// GET /api/model?model=… per model name ("" = the default), fetched once each.
const infos = new Map();
// Absolute time, so the page can place the worker's events on its own timeline.
const now = () => performance.timeOrigin + performance.now();

/** The answer of `url` + "/stream" (what `url` answers), posting its progress on the way. */
async function streamed(id, url, body, signal) {
  let answer = null;
  let failure = null;
  // Read to the end (the server closes after `result` or `error`): a stream left unread
  // would be cut off.
  await stream(url + STREAM, body, {
    signal,
    onEvent: (name, data) => {
      if (name === "progress") self.postMessage({ id, type: "progress", progress: data });
      else if (name === "result") answer = data;
      else if (name === "error") failure = data;
    },
  });
  if (failure) throw new ApiError(failure.status, failure.detail);
  if (!answer) throw new Error("the stream ended without an answer");
  return answer;
}

function modelInfo(model) {
  const key = model || "";
  if (!infos.has(key)) {
    const query = model ? `?model=${encodeURIComponent(model)}` : "";
    const request = get(`/api/model${query}`);
    request.catch(() => infos.delete(key)); // a failed look-up is asked again next time
    infos.set(key, request);
  }
  return infos.get(key);
}

function postLayer(id, n, answer, i = 0) {
  const data = {
    heads: decodeCompact(answer.attentions[i]),
    average: decodeCompact(answer.head_average[i]),
    // The server may leave the rollout out (null) for a long text.
    rollout: answer.rollout && answer.rollout[i] ? decodeCompact(answer.rollout[i]) : null,
  };
  const buffers = [data.heads.values.buffer, data.average.values.buffer, ...(data.rollout ? [data.rollout.values.buffer] : [])];
  self.postMessage({ id, type: "layer", n, data, t: now() }, buffers);
}

function withoutMaps(answer) {
  const meta = { ...answer };
  for (const key of MAPS) delete meta[key];
  return meta;
}

async function attention(id, body, signal) {
  // The grid's maps pooled (model-overview.js), an encoder-decoder's as any other's: a
  // short text with few heads comes whole.
  const info = await modelInfo(body.model);
  if (info.layers) body = { ...body, pool: gridPool(info.layers, info.heads) };
  self.postMessage({ id, type: "info", info });
  const first = await streamed(id, URL_ATTENTION, { ...body, layers: [1] }, signal);
  const others = Array.from({ length: Math.max(0, info.layers - 1) }, (_, i) => i + 2);
  // Whole maps: one request a layer, in parallel (the server keeps the forward pass).
  // Pooled maps: one request for every other layer, since a forward too big for the
  // server's cache of results would otherwise run again for each layer.
  const rest = !others.length
    ? []
    : isPooled(first)
    ? [post(URL_ATTENTION, { ...body, layers: others }, signal).then((answer) => others.map((n, i) => ({ n, answer, i })))]
    : others.map((n) => post(URL_ATTENTION, { ...body, layers: [n] }, signal).then((answer) => [{ n, answer, i: 0 }]));
  for (const p of rest) p.catch(() => {});
  self.postMessage({ id, type: "meta", meta: withoutMaps(first), t: now() });
  postLayer(id, 1, first);
  await Promise.all(rest.map((p) => p.then((parts) => parts.forEach(({ n, answer, i }) => postLayer(id, n, answer, i)))));
  self.postMessage({ id, type: "done", t: now() });
}

async function generate(id, body, signal) {
  const infoReady = modelInfo(body.model);
  const answer = await streamed(id, URL_GENERATE, body, signal);
  const info = await infoReady;
  self.postMessage({ id, type: "info", info });
  self.postMessage({ id, type: "meta", meta: withoutMaps(answer), t: now() });
  answer.layers.forEach((n, i) => postLayer(id, n, answer, i));
  self.postMessage({ id, type: "done", t: now() });
}

self.addEventListener("message", (ev) => {
  const { id, kind, body } = ev.data;
  if (kind === "cancel") {
    if (controllers.has(id)) controllers.get(id).abort();
    return;
  }
  const controller = new AbortController();
  controllers.set(id, controller);
  (kind === "generate" ? generate : attention)(id, body, controller.signal)
    .catch((err) => {
      const aborted = isAbort(err, controller.signal);
      const status = err instanceof ApiError ? err.status : 0;
      const detail = aborted ? "cancelled: a newer request took its place" : err instanceof ApiError ? err.detail : `The server did not answer (${err.message}).`;
      self.postMessage({ id, type: "error", status, detail, aborted });
    })
    .finally(() => controllers.delete(id));
});
