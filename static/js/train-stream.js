// POST /api/train (or a model's streamed request) and read its Server-Sent Events as
// they arrive. EventSource cannot POST (nor upload a file): fetch() and a stream reader.

import { ApiError } from "./api.js";

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
 * Start a run and call onEvent(name, data) for each event until the stream ends.
 * body: a plain object (sent as JSON) or a FormData (multipart, with the file).
 * A 4xx/429 answer throws ApiError with the server's detail; aborting `signal`
 * closes the connection, which stops the run on the server.
 */
export function streamTraining(body, options) {
  return streamEvents("/api/train", body, options);
}

/** POST `body` to `url` and call onEvent(name, data) for each Server-Sent Event (as above). */
export async function streamEvents(url, body, { signal, onEvent }) {
  const init =
    body instanceof FormData
      ? { method: "POST", body, signal, headers: { accept: "text/event-stream" } }
      : {
          method: "POST",
          body: JSON.stringify(body),
          signal,
          headers: { accept: "text/event-stream", "content-type": "application/json" },
        };
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    if (signal && signal.aborted) throw err;
    throw new ApiError(0, `The server did not answer (${err.message}).`);
  }
  if (!response.ok) {
    const payload = await response.json().catch(() => null);
    const error = new ApiError(response.status, payload && payload.detail ? payload.detail : response.statusText);
    error.retryAfter = Number(response.headers.get("retry-after")) || null;
    throw error;
  }
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
