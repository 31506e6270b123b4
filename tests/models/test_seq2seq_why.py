"""The QK decomposition of a BART encoder-decoder's three stacks, in the core, against
transformers' eager maps (Marian's, through the API at two lengths: test_stack_matrix.py;
at ≈4,000 tokens: test_long_api.py).  BART norms its embeddings (``layernorm_embedding``):
the embedding component is the stream's first state, after that norm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

SOURCE = "The cat sat on the mat, and the cat was tired because the mat was hard."
TARGET = "Die Katze sass auf der Matte."


@pytest.fixture(scope="module")
def bart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """(the app's EncoderDecoder, transformers' eager model) of one random BART."""
    transformers = require("transformers")
    from attention_core.models.hf.seq2seq import EncoderDecoder

    root: Path = make_seq2seq(tmp_path_factory.mktemp("why") / "bart", "bart", seed=4)
    eager = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        root, attn_implementation="eager", dtype=torch.float32
    ).eval()
    return EncoderDecoder.from_dir(root, "bart"), eager


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_bart_why_equals_transformers_map_on_each_stack(bart: tuple[Any, Any], stack: str) -> None:
    from attention_core.analysis.seq2seq_heads import read
    from attention_core.analysis.seq2seq_why import seq2seq_why

    model, eager = bart
    text = read(model, SOURCE, TARGET)
    with torch.inference_mode():
        out = eager(
            input_ids=torch.tensor([text.source]),
            decoder_input_ids=torch.tensor([text.target.input_ids]),
            output_attentions=True,
        )
    maps = {
        "encoder": out.encoder_attentions,
        "decoder": out.decoder_attentions,
        "cross": out.cross_attentions,
    }[stack]
    for layer in (0, 1):
        want = maps[layer][0, 2]  # head 3: (T, S)
        T, S = want.shape
        row, cols = T - 2, (1, S - 3)
        found = [seq2seq_why(model, text, stack, layer, 2, row, col) for col in cols]
        for result, col in zip(found, cols, strict=True):
            assert result.weight == pytest.approx(float(want[row, col]), abs=1e-6)
            assert float(result.grid.sum()) == pytest.approx(result.score, abs=1e-4)
            keys = result.key_components or result.components
            assert result.grid.shape == (len(result.components), len(keys))
        log_ratio = float(torch.log(want[row, cols[0]] / want[row, cols[1]]))
        assert found[0].score - found[1].score == pytest.approx(log_ratio, abs=1e-4)
