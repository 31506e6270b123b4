"""Issue 32 item 7: ``each_head`` on a decoder keeps every batch within ``BATCH_CELLS``
attention cells (rows × heads × T²) even when one layer's 1 + H rows do not fit: the
layer's heads are ablated in chunks, and the grid is the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core.analysis import ablation, each_head_effects, head_model
from attention_core.models import GPT2, Decoder

TEXT = "The bank approved the loan, and the river bank was muddy."


def batch_sizes(decoder: Decoder, ids: list[int]) -> tuple[torch.Tensor, list[int]]:
    """The each_head grid and the batch size of every block's input on the way."""
    heads = head_model(decoder)
    seen: list[int] = []

    def record(_m: torch.nn.Module, args: tuple[Any, ...]) -> None:
        seen.append(int(args[0].shape[0]))

    # Each block's first norm: inside the block, so after a run's own pre-hooks (its grow).
    norms = [block.ln_1 for block in decoder.model.transformer.h]
    hooks = [norm.register_forward_pre_hook(record) for norm in norms]
    try:
        with torch.inference_mode():
            return each_head_effects(heads, ids, "zero"), seen
    finally:
        for hook in hooks:
            hook.remove()


def test_a_layers_heads_are_chunked_when_their_batch_is_over_the_limit(
    checkpoints: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoder = Decoder.from_dir(checkpoints / "tiny-gpt2", GPT2.from_pretrained, "gpt2")
    ids = list(decoder.tokenize(TEXT).input_ids)
    T, H, L = len(ids), decoder.config.num_heads, decoder.config.num_layers
    whole, seen = batch_sizes(decoder, ids)
    assert max(seen) == 1 + L * H  # today's small case: every layer's ablations in one pass
    rows = 3  # a pass may hold 3 rows: the clean text and 2 ablations, fewer than 1 + H
    assert 1 + H > rows
    monkeypatch.setattr(ablation, "BATCH_CELLS", rows * H * T * T)
    chunked, seen = batch_sizes(decoder, ids)
    assert max(seen) <= rows
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=0)
    assert chunked.shape == (L, H)
