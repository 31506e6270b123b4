"""A viewer needs no logits: ``num_logits=0`` (what ``Decoder.encode`` and ``trace`` pass)
must cost no language-modelling-head FLOPs, for both decoder families."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_core.models import GPT2, GPT2Config, Llama, LlamaConfig

T, C, V = 24, 32, 5000


def flops(model: torch.nn.Module, num_logits: int | None) -> int:
    ids = torch.arange(T)[None] % V  # (1, T)
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        out = model(ids, num_logits=num_logits, output_attentions=True)
    assert out.logits.shape == (1, T if num_logits is None else num_logits, V)
    return int(counter.get_total_flops())


@pytest.mark.parametrize(
    "model",
    [
        GPT2(GPT2Config(vocab_size=V, n_positions=64, n_embd=C, n_layer=2, n_head=4)),
        Llama(
            LlamaConfig(
                vocab_size=V,
                hidden_size=C,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=64,
            )
        ),
    ],
    ids=["gpt2", "llama"],
)
def test_no_logits_means_no_head_matmul(model: torch.nn.Module) -> None:
    model.eval()
    head = 2 * C * V  # one position's logits: a (1, C) @ (C, V) matmul
    every, one, none = flops(model, None), flops(model, 1), flops(model, 0)
    assert every - none == T * head
    assert one - none == head
