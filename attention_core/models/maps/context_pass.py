"""A forward pass that needs no map at all: every attention layer's context, block by block.

Ablation, the logit lens and the other analyses that read a model's outputs
(its residual stream, its predictions) never look at a map, so inside
``context_only()`` every attention call (the core families', BERT's, the
transformers backend's ``core_attention``) goes to ``ContextPass.steps``: the
context from ``blocked_attention``, a bounded block of rows at a time over
every batch row and head, its weights dropped block by block.  No (T, T) map
of a head is ever whole, at any length; a short input is one block, the same
numbers as one whole ``attention_with_steps``.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext

from ...attention import AttentionSteps
from ...blocked_attention import (
    DEFAULT_BLOCK_CELLS,
    AttentionCall,
    blocked_attention,
    rows_per_block,
)
from .blocked_pass import BlockedPass, blocked_pass, context_steps


class ContextPass:
    """Each call's context (..., H, T, D_v), ``block_cells`` scores at a time over every
    batch row and head; no weights kept."""

    def __init__(self, block_cells: int = DEFAULT_BLOCK_CELLS) -> None:
        self.block_cells = block_cells

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        query = call.query
        maps = math.prod(query.shape[:-2])  # batch rows × heads
        rows = rows_per_block(maps, int(call.key.shape[-2]), self.block_cells)
        context = blocked_attention(call, block_rows=rows)
        return context_steps(query, context, None, call.scale_factor)


def context_only(maps_wanted: bool = False) -> AbstractContextManager[BlockedPass | None]:
    """Within the block this thread's forward passes compute each attention's context block
    by block (``ContextPass``), unless ``maps_wanted`` (then as they would anyway)."""
    return nullcontext() if maps_wanted else blocked_pass(ContextPass())
