"""The request bodies /docs pre-fills ("Try it out"), each one that succeeds against a
server with the default settings: the built-in MiniLM (an encoder) and the built-in
tiny-bank-gpt (a decoder, for what only decoders do).  tests/e2e/test_docs_examples.py
sends each as Swagger UI writes it."""

from __future__ import annotations

from typing import Any

ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
DECODER = "tiny-bank-gpt"
DECODER_TEXT = "Kim rowed the boat, then went to the bank"


def example(body: dict[str, Any]) -> dict[str, Any]:
    """A model's ``json_schema_extra``: ``body`` as its one example."""
    return {"examples": [body]}


MAPS = example({"model": ENCODER, "text": "The bank approved it."})
GENERATE = example({"model": DECODER, "prompt": DECODER_TEXT, "max_new_tokens": 4})
HEAD = example({"model": ENCODER, "text": "The cat sat on the mat", "layer": 1, "head": 1})
HEAD_SCORES = example({"model": ENCODER, "text": "The bank approved it."})
ABLATE = example({"model": ENCODER, "text": "The bank approved it.", "heads": [[1, 2]]})
LOGIT_LENS = example({"model": DECODER, "text": DECODER_TEXT})
TRAIN = example({"architecture": "bigram", "max_steps": 5, "eval_every": 0, "sample_chars": 0})
MONEY_TEXT = "Kim counted the cash, then went to the bank "
WHY = example({"model": DECODER, "text": MONEY_TEXT, "layer": 2, "head": 1, "row": 43, "col": 19})
ATTRIBUTE = example(
    {
        "model": DECODER,
        "text": MONEY_TEXT,
        "method": "atp_star",
        "ablation": "mean",
        "target": {"position": 43, "token": "a"},
    }
)
