// The server's limits (GET /api/limits, also in every page's initial data), so that
// controls cap themselves instead of sending requests the server must refuse.

import { initialData } from "./dom.js";

// The server's defaults, used only if a page came without its initial data.
const DEFAULTS = {
  max_tokens: 64,
  max_token_chars: 64,
  max_dim: 256,
  max_heads: 16,
  max_vocabulary_words: 256,
  max_abs_value: 1e6,
  max_lesson_dims: 32,
  max_lesson_dim: 4096,
  max_lesson_trials: 20000,
  max_lesson_samples: 4000000,
  max_lesson_scores: 64,
};

export const LIMITS = Object.freeze({ ...DEFAULTS, ...(initialData().limits || {}) });

/** Whether the server has a checkpoint for MiniLM word vectors (unknown: assume yes). */
export const MODEL_VECTORS = initialData().model_vectors !== false;
