// Fetches and decodes the model's attention off the main thread (see fetchLayers
// in model-data.js).  Messages in: {id, body}.  Out: {id, type: "info" | "meta" |
// "layer" | "done" | "error", ...}; decoded maps are transferred, not copied.

import { decodeCompact } from "./model-data.js";

const URL_ATTENTION = "/api/model/attention";
let info = null;
// Absolute time, so the page can place the worker's events on its own timeline.
const now = () => performance.timeOrigin + performance.now();

async function readJson(response) {
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    throw Object.assign(new Error("api"), { status: response.status, detail: body && body.detail ? body.detail : response.statusText });
  }
  return body;
}

function send(body) {
  return fetch(URL_ATTENTION, {
    method: "POST",
    headers: { accept: "application/json", "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

function postLayer(id, n, answer, i = 0) {
  const data = {
    heads: decodeCompact(answer.attentions[i]),
    average: decodeCompact(answer.head_average[i]),
    rollout: decodeCompact(answer.rollout[i]),
  };
  const buffers = [data.heads.values.buffer, data.average.values.buffer, data.rollout.values.buffer];
  self.postMessage({ id, type: "layer", n, data, t: now() }, buffers);
}

async function run(id, body) {
  const infoReady = info
    ? Promise.resolve(info)
    : fetch("/api/model", { headers: { accept: "application/json" } }).then(readJson);
  const firstResponse = await send({ ...body, layers: [1] });
  info = await infoReady;
  self.postMessage({ id, type: "info", info });
  const rest = [];
  if (firstResponse.ok) {
    for (let n = 2; n <= info.layers; n++) {
      rest.push(send({ ...body, layers: [n] }).then(readJson).then((answer) => ({ n, answer })));
    }
  }
  for (const p of rest) p.catch(() => {});
  const first = await readJson(firstResponse);
  const { attentions, head_average, rollout, ...meta } = first;
  self.postMessage({ id, type: "meta", meta, t: now() });
  postLayer(id, 1, first);
  await Promise.all(rest.map((p) => p.then(({ n, answer }) => postLayer(id, n, answer))));
  self.postMessage({ id, type: "done", t: now() });
}

self.addEventListener("message", (ev) => {
  const { id, body } = ev.data;
  run(id, body).catch((err) => {
    const status = err.status ?? 0;
    const detail = err.detail ?? `The server did not answer (${err.message}).`;
    self.postMessage({ id, type: "error", status, detail });
  });
});
