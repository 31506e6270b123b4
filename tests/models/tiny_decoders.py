"""Two-layer hand-written decoders of random weights (GPT-2, and Llama with GQA: 4 heads,
2 key/value heads), and a forward pass that counts its FLOPs with torch's counter
(test_maps_only_pass, test_lm_head_skipped)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from attention_core.models import GPT2, GPT2Config, Llama, LlamaConfig


def tiny_gpt2(vocab: int, width: int, inner: int | None = None, seed: int = 1) -> GPT2:
    """``inner``: the MLP's width (None: GPT-2's 4 x ``width``)."""
    config = GPT2Config(
        vocab_size=vocab, n_positions=64, n_embd=width, n_layer=2, n_head=4, n_inner=inner
    )
    torch.manual_seed(seed)
    model = GPT2(config)
    model.init_weights()
    return model.eval()


def tiny_llama(vocab: int, width: int, inner: int, seed: int = 2) -> Llama:
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=width,
        intermediate_size=inner,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    model = Llama(config)
    model.init_weights()
    return model.eval()


def counted_forward(model: nn.Module, ids: torch.Tensor, **options: Any) -> tuple[Any, int]:
    """The model's output on ``ids`` (attentions kept) and the FLOPs it took."""
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        out = model(ids, output_attentions=True, **options)
    return out, int(counter.get_total_flops())
