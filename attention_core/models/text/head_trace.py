"""One real head, step by step: the slice of a ``LayerTrace`` that one query head used.

The same steps the lessons show for a toy head (q, k, v, scores, scaled and
masked scores, weights, context), with a real model's numbers.  ``x`` is the
layer's attention input (after the layer's norm in pre-norm decoders); with
grouped-query attention the query head reads its own key/value head
``head // (H / H_kv)``; with RoPE, ``q`` and ``k`` are rotated, as attention
used them, and the projections before the rotation come along too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...attention import CoreSteps
from ...errors import SpecError
from ..base.outputs import AttentionInputs, LayerTrace


@dataclass(frozen=True)
class HeadTrace(CoreSteps, AttentionInputs):
    """Shapes (T queries, S keys, C model width, D head width): x (T, C); q (T, D);
    k, v (S, D); attn_scores, scaled_scores, masked_scores, attn_weights (T, S);
    context_vec (T, D); q_unrotated (T, D) and k_unrotated (S, D) with RoPE, else None.
    The optional steps of ``AttentionSteps``, None when the model has none:
    biased_scores, capped_scores (T, S) with ``softcap``; sink_weights (T,).
    """

    head: int  # 0-based query head
    kv_head: int
    causal: bool
    q_unrotated: torch.Tensor | None = None
    k_unrotated: torch.Tensor | None = None
    biased_scores: torch.Tensor | None = None
    capped_scores: torch.Tensor | None = None
    softcap: float | None = None
    sink_weights: torch.Tensor | None = None
    qk_norm: bool = False  # q and k went through the family's q/k norms


def head_trace(trace: LayerTrace, head: int, causal: bool) -> HeadTrace:
    """Query head ``head`` (0-based) of the first sequence in ``trace``.

    ``causal`` says whether the model masks later positions (decoders do).
    """
    num_heads, num_kv_heads = trace.q.shape[1], trace.k.shape[1]
    if not 0 <= head < num_heads:
        raise SpecError(
            f"head {head + 1} does not exist; this layer has heads 1 to {num_heads}",
            field="head",
        )
    kv_head = head // (num_heads // num_kv_heads)
    steps = trace.steps

    def pick(t: torch.Tensor | None, index: int) -> torch.Tensor | None:
        return None if t is None else t[0, index]  # (B, H, T, D) -> (T, D)

    return HeadTrace(
        layer=trace.layer,
        head=head,
        kv_head=kv_head,
        x=trace.x[0],  # (T, C)
        q=trace.q[0, head],
        k=trace.k[0, kv_head],
        v=trace.v[0, kv_head],
        attn_scores=steps.attn_scores[0, head],  # (T, S)
        scaled_scores=steps.scaled_scores[0, head],
        masked_scores=steps.masked_scores[0, head],
        attn_weights=steps.attn_weights[0, head],
        context_vec=steps.context_vec[0, head],  # (T, D)
        scale=steps.scale,
        causal=causal,
        q_unrotated=pick(trace.q_unrotated, head),
        k_unrotated=pick(trace.k_unrotated, kv_head),
        biased_scores=_head_of(steps.biased_scores, head),
        capped_scores=_head_of(steps.capped_scores, head),
        softcap=steps.softcap,
        sink_weights=_head_of(steps.sink_weights, head),
        qk_norm=trace.qk_norm,
    )


def _head_of(t: torch.Tensor | None, head: int) -> torch.Tensor | None:
    """One query head of an optional step: (B, H, T, S) -> (T, S), (B, H, T) -> (T,).

    A bias shared by the heads (broadcast over them) gives its one head."""
    if t is None:
        return None
    return t[0, head if t.shape[1] > 1 else 0]
