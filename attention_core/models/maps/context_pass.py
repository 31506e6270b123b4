"""A forward pass that needs no map at all: every attention layer's context, block by block.

Ablation, the logit lens and the other analyses that read a model's outputs
(its residual stream, its predictions) never look at a map, so their forward
passes are given a ``ContextPass`` (``context_only()``): every attention call
(the core families', BERT's, the transformers backend's ``core_attention``)
goes to ``ContextPass.steps``.  A call with no mask tensor, score bias, soft-cap
or sinks (causal or unmasked) is ``attention_with_steps(keep_weights=False)``:
torch's fused kernel, no map at all.  Any other call's context comes from
``blocked_attention``, a bounded block of rows at a time over every batch row
and head, its weights dropped block by block.  No (T, T) map of a head is ever
whole, at any length.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...attention import AttentionSteps, attention_with_steps, context_steps
from ...blocked_attention import (
    DEFAULT_BLOCK_CELLS,
    AttentionCall,
    blocked_attention,
    rows_per_block,
)
from .blocked_pass import BlockedPass


class ContextPass:
    """Each call's context (..., H, T, D_v), ``block_cells`` scores at a time over every
    batch row and head; no weights kept."""

    def __init__(self, block_cells: int = DEFAULT_BLOCK_CELLS, *, fused: bool = True) -> None:
        self.block_cells = block_cells
        self.fused = fused  # False: every call blocked, the maps pass's arithmetic bit for bit

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        if self.fused and call.fuses_context:
            return attention_with_steps(
                call.query,
                call.key,
                call.value,
                is_causal=call.is_causal,
                scale=call.scale,
                enable_gqa=call.enable_gqa,
                keep_weights=False,
            )
        context = blocked_attention(call, block_rows=self.block_rows(call))
        return context_steps(call.query, context, None, call.scale_factor)

    def block_rows(self, call: AttentionCall) -> int:
        """Rows a block whose scores over every batch row and head fit ``block_cells``."""
        maps = math.prod(call.query.shape[:-2])  # batch rows × heads
        return rows_per_block(
            maps, int(call.key.shape[-2]), self.block_cells, device=call.query.device
        )


def context_only(
    maps_wanted: bool = False, given: BlockedPass | None = None, *, fused: bool = True
) -> BlockedPass | None:
    """The pass for a forward that needs no map: ``given`` when the caller gave one (it
    keeps what it needs), else a ``ContextPass`` (each attention's context block by block)
    unless ``maps_wanted`` (None: every attention as it would run anyway)."""
    if given is not None:
        return given
    return None if maps_wanted else ContextPass(fused=fused)


# (layer, first row, first column, weights (..., H, rows, cols)) of one block of rows.
LayerBlockSink = Callable[[int, int, int, torch.Tensor], None]


class WatchedPass(ContextPass):
    """A ``ContextPass`` that hands every block's weights to ``on_block`` with its layer
    (0-based; counted in call order where the caller does not say): a sum over a map's
    cells (an induction score) read from a forward that holds no map."""

    def __init__(self, on_block: LayerBlockSink, block_cells: int = DEFAULT_BLOCK_CELLS) -> None:
        super().__init__(block_cells)
        self.on_block = on_block
        self.calls = 0

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        index = self.calls if layer is None else layer
        self.calls += 1

        def sink(r0: int, c0: int, weights: torch.Tensor) -> None:
            self.on_block(index, r0, c0, weights)

        context = blocked_attention(call, block_rows=self.block_rows(call), on_block=sink)
        return context_steps(call.query, context, None, call.scale_factor)
