"""A forward pass whose attention layers run block by block (``blocked_attention``).

A forward pass given a pass (the ``blocked`` forward option of a core decoder,
``DecoderLM``; ``blocked`` of BERT's ``forward_layers``; the ``AttentionRun``
keyword of a transformers model) hands every attention call (``GPT2Attention``,
``LlamaAttention``, BERT's layers, the transformers backend's
``hf.capture.core_attention``) to ``pass_.steps`` instead of one whole
``attention_with_steps``.  The pass travels with the call, as an argument,
never through state shared by threads: two requests running one model at once
each reach their own pass.  The passes:

- ``long_maps.LongPass``: a long input; q and k kept, the maps gathered into
  a pooled/cropped grid, never held (its steps carry the context only);
- ``context_pass.ContextPass``: no map at all, each layer's context in blocks;
- ``FullMapsPass``: every full map kept, as a viewer's forward with
  ``output_attentions`` needs them, but computed in blocks of rows so that a
  causal block skips the keys none of its rows sees: half the scores, the
  mask and the softmax of a causal map are never computed (they are the
  zeros of the weights tensor).
"""

from __future__ import annotations

from typing import Protocol

import torch

from ...attention import AttentionSteps, context_steps
from ...blocked_attention import AttentionCall, blocked_attention

# Rows per block of the full-maps pass: fastest of 32-256 at T = 1,024 (GPT-2 small's
# 12 heads: 0.48x the time of one whole causal ``attention_with_steps``, 1 thread).
FULL_MAPS_BLOCK_ROWS = 64


class BlockedPass(Protocol):
    """What the attention modules call when a forward pass is given one."""

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        """One attention call (``layer``: 0-based, None when the caller does not know it:
        the pass counts the calls; ``module``: the attention module, which tells an
        encoder-decoder's stacks apart) as ``attention_with_steps`` would return it, with
        empty tensors for the steps the pass does not keep."""
        ...


class FullMapsPass:
    """Every layer's full weights (B, H, T, S), computed ``block_rows`` rows at a time."""

    def __init__(self, block_rows: int = FULL_MAPS_BLOCK_ROWS) -> None:
        self.block_rows = block_rows

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        query = call.query
        weights = query.new_empty(*query.shape[:-1], call.key.shape[-2])  # (B, H, T, S)

        def put(r0: int, c0: int, block: torch.Tensor) -> None:
            # Each row block written once: its weights, and zeros where no row of it looks
            # (half a causal map: filling the whole tensor with zeros first costs a pass more).
            rows = weights[..., r0 : r0 + block.shape[-2], :]
            c1 = c0 + block.shape[-1]
            rows[..., :c0] = 0.0
            rows[..., c0:c1] = block
            rows[..., c1:] = 0.0

        context = blocked_attention(call, block_rows=self.block_rows, on_block=put)
        return context_steps(query, context, weights, call.scale_factor)
