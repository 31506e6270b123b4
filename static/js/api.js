// The one API client of every page (and of model-worker.js): same origin, relative
// URLs. get, post and stream (Server-Sent Events read from a POST, as /api/train and
// the models' …/stream answer), abort (latest(): a newer request cancels the older),
// and one error type: ApiError, carrying the server's detail list ({loc, msg, type,
// ctx}) so pages word each error from its type and ctx, beside its control.

export class ApiError extends Error {
  constructor(status, detail, { retryAfter = null } = {}) {
    const items = Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail), type: "error" }];
    super(items.map((d) => d.msg).join("; "));
    this.status = status;
    this.detail = items;
    this.retryAfter = retryAfter;
  }

  /** The first item's stable type (app/errors.py, or pydantic's). */
  get type() {
    return this.detail[0] ? this.detail[0].type : "error";
  }

  /** The first item's ctx ({limit, found, setting, …}), or null. */
  get ctx() {
    return (this.detail[0] && this.detail[0].ctx) || null;
  }
}

/** Whether err is a request its caller cancelled (not a server failure). */
export const isAbort = (err, signal = null) => Boolean((err && err.name === "AbortError") || (signal && signal.aborted));

/** A failure as one line for a reader: each item's message, never the JSON. */
export const errorText = (err) => (err instanceof ApiError ? err.detail.map((d) => d.msg).join(" ") : String((err && err.message) || err));

async function send(url, init) {
  try {
    return await fetch(url, init);
  } catch (err) {
    if (isAbort(err, init.signal)) throw err;
    throw new ApiError(0, `The server did not answer (${err.message}).`);
  }
}

async function failure(response) {
  const body = await response.json().catch(() => null);
  const retryAfter = Number(response.headers.get("retry-after")) || null;
  return new ApiError(response.status, body && body.detail ? body.detail : response.statusText, { retryAfter });
}

async function request(url, init = {}) {
  const response = await send(url, { ...init, headers: { accept: "application/json", ...init.headers } });
  if (!response.ok) throw await failure(response);
  return response.json().catch(() => null);
}

/** GET url; its JSON, or an ApiError (an abort through `signal` rethrown). */
export const get = (url, { signal } = {}) => request(url, { signal });

/** POST `payload` as JSON; the answer's JSON, or an ApiError (an abort through `signal` rethrown). */
export function post(url, payload, signal = undefined) {
  return request(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload), signal });
}

/** DELETE url; its JSON, or an ApiError. */
export const del = (url) => request(url, { method: "DELETE" });

/**
 * A cancel-the-older helper: each call aborts the request the previous call's signal
 * started and answers a fresh signal (a newer request takes the older one's place).
 */
export function latest() {
  let controller = null;
  const next = () => {
    if (controller) controller.abort();
    controller = new AbortController();
    return controller.signal;
  };
  next.abort = () => controller && controller.abort();
  return next;
}

/** One SSE message ("event: x\ndata: {...}") as {name, data}; null for a comment. */
export function parseMessage(text) {
  let name = "message";
  const data = [];
  for (const line of text.split("\n")) {
    if (line.startsWith(":") || line === "") continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { name, data: JSON.parse(data.join("\n")) };
}

/**
 * POST `body` (a plain object, sent as JSON, or a FormData: multipart, with a file) and
 * call onEvent(name, data) for each Server-Sent Event until the stream ends.  A 4xx/429
 * answer throws ApiError (with retryAfter); aborting `signal` closes the connection,
 * which stops the work on the server.  (EventSource cannot POST.)
 */
export async function stream(url, body, { signal, onEvent }) {
  const form = body instanceof FormData;
  const headers = form ? { accept: "text/event-stream" } : { accept: "text/event-stream", "content-type": "application/json" };
  const response = await send(url, { method: "POST", body: form ? body : JSON.stringify(body), signal, headers });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const message = parseMessage(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (message) onEvent(message.name, message.data);
    }
  }
}

export const api = {
  runs: () => get("/api/runs"),
  deleteRun: (name) => del(`/api/runs/${encodeURIComponent(name)}`),
  presets: () => get("/api/presets"),
  preset: (name) => get(`/api/presets/${encodeURIComponent(name)}`),
  vocabularies: () => get("/api/vocabularies"),
  attention: (spec) => post("/api/attention", spec),
  compare: (body) => post("/api/compare", body),
  expand: (spec) => post("/api/expand", spec),
  modelEmbeddings: (words) => post("/api/model/embeddings", { words }),
  scaling({ dims, trials = 1000, seed = 0, scores, scales }) {
    const q = new URLSearchParams();
    for (const d of dims) q.append("dims", d);
    q.set("trials", trials);
    q.set("seed", seed);
    for (const s of scores) q.append("scores", s);
    for (const s of scales) q.append("scales", s);
    return get(`/api/lessons/scaling?${q}`);
  },
};

/**
 * Show each error in the element whose data-error-for matches the field named by
 * loc (["body", "tokens", 2] -> "tokens"); unmatched ones go to "general". `word`
 * (item, field) -> text words it (feedback.js's plainMessage: from type and ctx);
 * without it the server's msg is shown as it is.
 */
export function showErrors(root, error, fieldMap = {}, word = null) {
  clearErrors(root);
  const items = error instanceof ApiError ? error.detail : [{ loc: [], msg: String(error.message || error) }];
  for (const item of items) {
    const loc = (item.loc || []).filter((p) => p !== "body" && p !== "query");
    const field = typeof loc[0] === "string" ? loc[0] : "";
    const target = fieldMap[field] || field;
    const box = root.querySelector(`[data-error-for="${CSS.escape(target)}"]`) || root.querySelector('[data-error-for="general"]');
    if (!box) continue;
    const where = loc.length > 1 ? ` (${loc.join(" → ")})` : "";
    const text = word ? word(item, field) : `${item.msg}${where}`;
    box.textContent = box.textContent ? `${box.textContent} ${text}` : text;
  }
}

export function clearErrors(root) {
  for (const box of root.querySelectorAll("[data-error-for]")) box.textContent = "";
}
