"""The end of every decoder's forward pass: run the blocks, keep what was asked for.

Each family embeds its tokens its own way and hands its blocks here, with the
extra arguments they take (GPT-2: the cache; Llama: RoPE's cos and sin, the
cache).  A block returns ``(x, steps, trace)``; ``trace`` is a ``LayerTrace``
when called with ``want_trace=True``; its attention goes to ``blocked`` when
the forward pass was given a pass (``blocked_pass.BlockedPass``).  Hidden states
follow transformers: the embeddings, each block's output, and the final-normed
output in place of the last block's raw one.  A maps-only pass (``maps_only``) calls its last block
with ``attention_only=True``: the block returns once its attention is computed
(its MLP skipped: for Llama-3.1-8B's shape 176 M of the layer's 218 M weights),
and neither the final norm nor the head runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ...errors import MODEL_CONTEXT, LimitExceeded
from ...progress import report
from ..maps.blocked_pass import BlockedPass
from .kv_cache import KVCache
from .outputs import DecoderOutput, LayerTrace


def first_position(cache: KVCache | None, length: int, context: int) -> int:
    """Where ``length`` new tokens go: after the cache's positions (0 without a cache).

    A ``SpecError`` naming the limit if they would run past the model's ``context``.
    """
    start = cache.length if cache is not None else 0
    if start + length > context:
        raise LimitExceeded(
            f"the sequence is {start + length} tokens; this model reads at most {context}",
            field="text",
            limit=context,
            found=start + length,
            setting=MODEL_CONTEXT,
        )
    return start


def run_blocks(
    x: torch.Tensor,
    blocks: Sequence[nn.Module],
    block_args: tuple[object, ...],
    final_norm: nn.Module,
    lm_head: nn.Module,
    *,
    cache: KVCache | None,
    num_logits: int | None,
    output_attentions: bool,
    output_hidden_states: bool,
    trace_layer: int | None,
    blocked: BlockedPass | None = None,
    maps_only: bool = False,
) -> DecoderOutput:
    """Shapes: x (B, T, C) embeddings -> ``DecoderOutput`` (logits for the last
    ``num_logits`` positions, all when None; none when ``maps_only``, see the module
    doc, which ``Wanted.of`` allows without hidden states only); the cache advances by T."""
    attentions: list[torch.Tensor] = []
    hidden: list[torch.Tensor] = [x] if output_hidden_states else []
    trace: LayerTrace | None = None
    last = len(blocks) - 1
    for i, block in enumerate(blocks):
        x, steps, layer_trace = block(
            x,
            *block_args,
            want_trace=i == trace_layer,
            attention_only=maps_only and i == last,
            blocked=blocked,
        )
        if output_attentions:
            attentions.append(steps.attn_weights)
        # Free this layer's scores (3 x (B, H, T, S)) before the next layer makes its own.
        del steps
        if output_hidden_states:
            hidden.append(x)
        trace = layer_trace or trace
        report("forward", i + 1, len(blocks))
    if maps_only:  # (no hidden states: ``Wanted.of``) x is not the last block's output
        num_logits = 0
    else:
        x = final_norm(x)
        if output_hidden_states:
            hidden[-1] = x
    if cache is not None:
        cache.advance(x.shape[1])
    # num_logits 0 (a viewer's pass) keeps no rows: the head's matmul is (B, 0, C) @ (C, V),
    # no FLOPs (tests/models/test_lm_head_skipped.py counts them).
    kept = x if num_logits is None else x[:, x.shape[1] - num_logits :]
    vocabulary = getattr(lm_head, "out_features", None)
    if kept.shape[1] == 0 and isinstance(vocabulary, int):
        # Not even called: a 16-bit head would cast its whole weight to float32 for nothing.
        logits = kept.new_zeros(kept.shape[0], 0, vocabulary)
    else:
        logits = lm_head(kept)
    return DecoderOutput(
        logits=logits,
        attentions=tuple(attentions),
        hidden_states=tuple(hidden),
        trace=trace,
    )
