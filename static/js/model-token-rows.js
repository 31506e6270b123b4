// One token's row in every layer and head when the page holds pooled maps only (a
// long text): asked from the server (`rows: [q, q + 1]`, `cols: [0, keys]`, the layers
// shown, every head) and kept per token, so going back to a token asks nothing.
// float16, not uint8: at thousands of tokens most weights are under uint8's step (1/255).

import { post } from "./api.js";
import { decodeCompact } from "./model-data.js";

// Rows kept on the page, in cells (the least recently shown go first; the one shown
// stays): 16 MB of floats, 256 tokens of a 2 × 2-head model at 4,096 keys, but only
// two of a 16 × 32-head one.
const KEEP_CELLS = 4 * 2 ** 20;

/**
 * The rows of one text's maps (request: the text and options the grid's maps came
 * from).  get(query, keys, layers) resolves to a Map layer -> Float32Array (H × keys,
 * head-major): row `query` of every head of each layer, its first `keys` columns.
 */
export function tokenRows(request) {
  const kept = new Map(); // "query:keys:layers" -> {promise, cells}
  let cells = 0;
  const asked = []; // every request sent (tests and the curious read them)

  function keep(key, entry) {
    kept.set(key, entry);
    cells += entry.cells;
    for (const [old, e] of kept) {
      if (cells <= KEEP_CELLS || old === key) break;
      kept.delete(old);
      cells -= e.cells;
    }
  }

  return {
    asked,
    get(query, keys, layers, H) {
      const key = `${query}:${keys}:${layers.join(",")}`;
      const hit = kept.get(key);
      if (hit) {
        kept.delete(key); // most recently shown last
        kept.set(key, hit);
        return hit.promise;
      }
      const body = { ...request, format: "compact", dtype: "float16", layers, rows: [query, query + 1], cols: [0, keys] };
      asked.push(key);
      const promise = post("/api/model/attention", body).then((answer) => {
        const rows = new Map();
        answer.layers.forEach((n, i) => rows.set(n, decodeCompact(answer.attentions[i]).values));
        return rows;
      });
      keep(key, { promise, cells: layers.length * H * keys });
      promise.catch(() => {
        if (kept.get(key)?.promise === promise) {
          kept.delete(key);
          cells -= layers.length * H * keys;
        }
      });
      return promise;
    },
  };
}
