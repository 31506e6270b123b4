"""What the pages call each model family, written once: /model's picker and summary
(app/routes/model_page.py) and the real-head explorer (initial data, explorer-real.js).
A family not listed (one transformers runs) is called by its own name."""

from __future__ import annotations

FAMILY_LABELS: dict[str, str] = {"bert": "BERT-family", "gpt2": "GPT-2", "llama": "Llama-family"}
