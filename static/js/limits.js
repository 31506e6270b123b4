// The server's limits (GET /api/limits, also in every page's initial data), so that
// controls cap themselves instead of sending requests the server must refuse. Written
// once, on the server (app/settings.py): the pages only read them.

import { initialData } from "./dom.js";

export const LIMITS = Object.freeze({ ...initialData().limits });

/** Whether the server has a checkpoint for MiniLM word vectors (unknown: assume yes). */
export const MODEL_VECTORS = initialData().model_vectors !== false;
