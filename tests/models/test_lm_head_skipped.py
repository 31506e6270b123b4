"""A viewer needs no logits: ``num_logits=0`` (what ``Decoder.encode`` and ``trace`` pass)
must cost no language-modelling-head FLOPs, for both decoder families."""

from __future__ import annotations

import pytest
import torch

from tests.models.tiny_decoders import counted_forward, tiny_gpt2, tiny_llama

T, C, V = 24, 32, 5000


def flops(model: torch.nn.Module, num_logits: int | None) -> int:
    ids = torch.arange(T)[None] % V  # (1, T)
    out, counted = counted_forward(model, ids, num_logits=num_logits)
    assert out.logits.shape == (1, T if num_logits is None else num_logits, V)
    return counted


@pytest.mark.parametrize(
    "model",
    [tiny_gpt2(V, C), tiny_llama(V, C, inner=64)],
    ids=["gpt2", "llama"],
)
def test_no_logits_means_no_head_matmul(model: torch.nn.Module) -> None:
    model.eval()
    head = 2 * C * V  # one position's logits: a (1, C) @ (C, V) matmul
    every, one, none = flops(model, None), flops(model, 1), flops(model, 0)
    assert every - none == T * head
    assert one - none == head
