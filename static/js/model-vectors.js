// MiniLM word vectors for the toy pages (issue 5): any word gets the pretrained
// model's own context-free vector (POST /api/model/embeddings), fetched once per word.
//
// MiniLM's vectors are 384 numbers wide. When the server takes narrower vectors
// (ATTENTION_VIZ_MAX_DIM, 256 by default) they are multiplied by one fixed random
// matrix R (384 × dim, entries N(0, 1/dim), seeded): a Johnson–Lindenstrauss
// projection, which keeps lengths and dot products roughly as they were. The same
// word always gets the same vector.

import { ApiError, api } from "./api.js";

export const MODEL_WIDTH = 384;
const SEED = 0x5eed;
const raw = new Map();
const pieces = new Map();
const projections = new Map();
export const UNKNOWN_PIECE = "[UNK]";

/** The width model vectors are sent with: all 384 numbers when the server allows it. */
export function modelDim(maxDim) {
  return Math.max(1, Math.min(MODEL_WIDTH, maxDim || MODEL_WIDTH));
}

/** One vector per word (`dim` wide), in order. Errors name the embedding field. */
export async function modelVectors(words, dim, loc = ["body", "embedding"]) {
  const missing = [...new Set(words.filter((w) => !raw.has(w)))];
  if (missing.length) {
    let answer;
    try {
      answer = await api.modelEmbeddings(missing);
    } catch (err) {
      const why = err instanceof ApiError ? err.message : String(err);
      const status = err instanceof ApiError && err.status ? `HTTP ${err.status}: ` : "";
      throw new ApiError(err.status || 0, [
        {
          loc,
          msg: `Model embeddings are not available: the server could not give MiniLM's word vectors (${status}${why}). Is the pretrained model installed? Pick another embedding meanwhile.`,
          type: "model_unavailable",
        },
      ]);
    }
    answer.words.forEach((w, i) => {
      raw.set(w, answer.vectors[i]);
      pieces.set(w, answer.pieces[i]);
    });
  }
  return words.map((w) => narrow(raw.get(w), dim));
}

/** The WordPieces MiniLM split `word` into (known once its vector was fetched), or null. */
export function modelPieces(word) {
  return pieces.get(word) || null;
}

/**
 * The words (of those fetched) that the model's vocabulary lacks, wholly or in part:
 * some of their WordPieces are [UNK], so the model sees them as that one token.
 * Reusable for any tokenizer output: pass piecesOf(word) -> list of pieces.
 */
export function wordsWithUnknownPieces(words, piecesOf = modelPieces) {
  return [...new Set(words)].filter((w) => {
    const p = piecesOf(w);
    return Boolean(p) && p.includes(UNKNOWN_PIECE);
  });
}

function narrow(vector, dim) {
  if (dim >= vector.length) return vector.slice();
  const R = projection(vector.length, dim);
  const out = new Array(dim).fill(0);
  for (let i = 0; i < vector.length; i++) {
    const v = vector[i];
    const row = R[i];
    for (let j = 0; j < dim; j++) out[j] += v * row[j];
  }
  return out.map((x) => Math.round(x * 1e6) / 1e6);
}

function projection(rows, cols) {
  const key = `${rows}x${cols}`;
  if (!projections.has(key)) {
    const next = mulberry32(SEED);
    const scale = 1 / Math.sqrt(cols);
    const R = Array.from({ length: rows }, () => Array.from({ length: cols }, () => gaussian(next) * scale));
    projections.set(key, R);
  }
  return projections.get(key);
}

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function gaussian(next) {
  const u = 1 - next(); // (0, 1]
  const v = next();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}
