// The JSON API, same origin, relative URLs. Errors become ApiError with the
// server's detail list ({loc, msg, type}), so pages can show msg by its control.

export class ApiError extends Error {
  constructor(status, detail) {
    const items = Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail), type: "error" }];
    super(items.map((d) => d.msg).join("; "));
    this.status = status;
    this.detail = items;
  }
}

async function request(url, options = {}) {
  let response;
  try {
    response = await fetch(url, { headers: { accept: "application/json" }, ...options });
  } catch (err) {
    if (err.name === "AbortError") throw err; // the caller cancelled it: not a server failure
    throw new ApiError(0, `The server did not answer (${err.message}).`);
  }
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body && body.detail ? body.detail : response.statusText);
  return body;
}

/** POST `payload` as JSON; the answer's JSON, or an ApiError (an abort through `signal` rethrown). */
export function post(url, payload, signal = undefined) {
  return request(url, {
    method: "POST",
    headers: { accept: "application/json", "content-type": "application/json" },
    body: JSON.stringify(payload),
    signal,
  });
}

export const api = {
  runs: () => request("/api/runs"),
  deleteRun: (name) => request(`/api/runs/${encodeURIComponent(name)}`, { method: "DELETE" }),
  presets: () => request("/api/presets"),
  preset: (name) => request(`/api/presets/${encodeURIComponent(name)}`),
  vocabularies: () => request("/api/vocabularies"),
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
    return request(`/api/lessons/scaling?${q}`);
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
