"""``decoder_output_scale``: what an encoder-decoder's forward multiplies its last decoder
state by before the LM head, checked against the forward itself for the T5 family (tied
and untied: transformers 5 loads every T5 config tied and keeps the saved choice in
``scale_decoder_outputs``), MT5 (never scaled in transformers 5), UMT5, LongT5, Switch
Transformers, and BART (never)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attention_core.analysis.seq2seq_heads import decoder_output_scale
from tests.requires import require

SMALL = {"vocab_size": 50, "d_model": 16, "d_kv": 4, "d_ff": 32, "num_heads": 4}
T5_LIKE: dict[str, dict[str, Any]] = {
    "t5": {"num_layers": 1},
    "mt5": {"num_layers": 1},
    "umt5": {"num_layers": 1},
    "longt5": {"num_layers": 1},
    "switch_transformers": {"num_layers": 2, "num_sparse_encoder_layers": 1, "num_experts": 2},
}
CASES = [(family, tied) for family in T5_LIKE for tied in (True, False)] + [("bart", None)]


def _model(family: str, tied: bool | None) -> Any:
    transformers = require("transformers")
    if family == "bart":
        config = transformers.BartConfig(
            vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_ffn_dim=32,
        )  # fmt: skip
    else:
        sizes = {**SMALL, **T5_LIKE[family], "tie_word_embeddings": tied}
        config = transformers.AutoConfig.for_model(family, **sizes)
    torch.manual_seed(0)
    return transformers.AutoModelForSeq2SeqLM.from_config(config).eval()


@pytest.mark.parametrize(("family", "tied"), CASES)
def test_the_scale_is_the_forwards(family: str, tied: bool | None) -> None:
    model = _model(family, tied)
    with torch.inference_mode():
        out = model(
            input_ids=torch.tensor([[3, 4, 5, 6]]),
            decoder_input_ids=torch.tensor([[0, 7, 8]]),
            output_hidden_states=True,
        )
        state = out.decoder_hidden_states[-1] * decoder_output_scale(model.config)
        logits = model.lm_head(state)
    bias = getattr(model, "final_logits_bias", None)
    logits = logits if bias is None else logits + bias
    torch.testing.assert_close(logits, out.logits, atol=1e-5, rtol=0)
