"""T5's relative position bias as a rule, computed for the cells a block asks, never whole.

T5 (and MT5) add to each score a learned bias per head read by the query-key distance's
bucket.  transformers' ``compute_bias`` makes it for the whole call, (1, H, T, S) floats
(805 MB at 4,096 tokens and 12 heads, beside the (T, S) buckets), once per stack and
held through it: every head's whole map's worth, which the long path never holds.
Here each attention module's ``compute_bias`` (on the instance, nothing global) returns
a ``RelativePositionBias`` instead: a blocked call reads the blocks of rows and columns
it computes (``blocked_attention.bias_block``), a whole call the whole bias
(``capture``), with the module's own bucketing and table, so the values are
transformers' own.  Its cross-attention has no bias, which its forward makes as
(1, H, T, S) zeros: a pre-hook hands it a ``ZeroBias`` instead.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...blocked_attention import BiasRule

# Attention modules whose ``compute_bias`` (query_length, key_length, device,
# past_seen_tokens) makes the relative position bias their forward only passes on.
RELATIVE_BIAS_CLASSES = frozenset({"T5Attention", "MT5Attention"})


class RelativePositionBias(BiasRule):
    """One call's bias: queries at positions ``past`` + 0..T-1, keys at 0..S-1, of the
    heads of ``index`` (None: all) of ``module`` (a T5 attention with the table)."""

    def __init__(
        self, module: Any, size: tuple[int, int], past: int, index: torch.Tensor | None = None
    ) -> None:
        self.module, self.size, self.past, self.index = module, size, past, index

    @property
    def shape(self) -> tuple[int, int, int]:
        heads = int(self.module.n_heads) if self.index is None else len(self.index)
        return heads, *self.size

    def block(self, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        module = self.module
        table: torch.Tensor = module.relative_attention_bias.weight  # (buckets, H)
        if self.index is not None:
            table = table.index_select(1, self.index.to(table.device))
        (r0, r1), (c0, c1) = rows, cols
        context = torch.arange(r0, r1, device=table.device)[:, None] + self.past
        memory = torch.arange(c0, c1, device=table.device)[None, :]
        buckets = module._relative_position_bucket(
            memory - context,
            bidirectional=not module.is_decoder,
            num_buckets=module.relative_attention_num_buckets,
            max_distance=module.relative_attention_max_distance,
        )
        return F.embedding(buckets, table).permute(2, 0, 1).float()  # (H, rows, cols)

    def heads(self, index: torch.Tensor) -> RelativePositionBias:
        chosen = index if self.index is None else self.index[index]
        return RelativePositionBias(self.module, self.size, self.past, chosen)


class ZeroBias(BiasRule):
    """T5's cross-attention bias: none, which its forward makes as (1, H, T, S) zeros."""

    def __init__(self, shape: tuple[int, int, int]) -> None:
        self._shape = shape

    @property
    def shape(self) -> tuple[int, int, int]:
        return self._shape

    def block(self, rows: tuple[int, int], cols: tuple[int, int]) -> torch.Tensor:
        return torch.zeros(1, 1, 1)  # broadcast over the block's heads, rows and columns

    def heads(self, index: torch.Tensor) -> ZeroBias:
        return ZeroBias((len(index), *self._shape[1:]))


def _zero_cross_bias(
    module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """A cross-attention call's missing bias as a ``ZeroBias`` (forward pre-hook)."""
    keys = kwargs.get("key_value_states")
    if kwargs.get("position_bias") is not None or keys is None or not args:
        return None
    shape = (int(module.n_heads), int(args[0].shape[1]), int(keys.shape[1]))
    return args, {**kwargs, "position_bias": ZeroBias(shape)}


def _compute_bias(
    self: Any,
    query_length: int,
    key_length: int,
    device: torch.device | None = None,
    past_seen_tokens: int = 0,
) -> RelativePositionBias:
    return RelativePositionBias(self, (int(query_length), int(key_length)), int(past_seen_tokens))


def install_relative_bias(model: nn.Module) -> int:
    """Each T5 attention module with the table computes its bias as a rule, each
    cross-attention is handed zeros as one; how many.  A ``compute_bias`` of another
    signature (another transformers) is left as it is."""
    count = 0
    for found in model.modules():
        module: Any = found  # a T5 attention: its own attributes
        if type(module).__name__ not in RELATIVE_BIAS_CLASSES:
            continue
        if "past_seen_tokens" not in inspect.signature(module.compute_bias).parameters:
            continue
        if module.has_relative_attention_bias:
            module.compute_bias = types.MethodType(_compute_bias, module)
        else:  # a cross-attention's zeros (the others are handed their stack's first bias)
            module.register_forward_pre_hook(_zero_cross_bias, with_kwargs=True)
        count += 1
    return count
