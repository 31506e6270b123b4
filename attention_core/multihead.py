"""Self- and cross-attention on one sequence, one head or many, fully traced.

Multi-head attention is the single-head math on a reshaped tensor: project,
split the width into H heads, run :func:`attention_with_steps` once over the
(H, T, d_head) batch, and join the heads back together.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attention import CoreSteps, attention_with_steps, uniform_causal_weights
from .errors import HEADS_INDIVISIBLE, SpecError


@dataclass(frozen=True)
class Projections:
    """Weights applied as ``x @ W`` (d_in, d_out), the tutorials' convention.

    ``W_out`` (H*d_v_head, d_model) is optional: without it the output is the
    concatenation of the heads.  A PyTorch ``nn.Linear`` weight is the
    transpose of these.
    """

    W_query: torch.Tensor
    W_key: torch.Tensor
    W_value: torch.Tensor
    W_out: torch.Tensor | None = None


@dataclass(frozen=True)
class AttentionTrace(CoreSteps):
    """Every step of one attention layer on one sequence.

    Shapes (T queries, S keys, H heads):
    x (T, d_in); source (S, d_in) — the keys' and values' input, equal to x
    in self-attention; q (H, T, d_k); k (H, S, d_k); v (H, S, d_v);
    attn_scores, scaled_scores, masked_scores, attn_weights (H, T, S);
    context_vec (H, T, d_v); concat (T, H*d_v); output (T, d_out).
    """

    x: torch.Tensor
    source: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    concat: torch.Tensor
    output: torch.Tensor
    causal: bool
    cross: bool

    @property
    def num_heads(self) -> int:
        return self.q.shape[0]


def _split_heads(t: torch.Tensor, num_heads: int, name: str) -> torch.Tensor:
    length, width = t.shape
    if width % num_heads:
        raise SpecError(
            f"the {name} width ({width}) is not a multiple of the number of heads ({num_heads})",
            field="num_heads",
            kind=HEADS_INDIVISIBLE,
            ctx={"width": width, "heads": num_heads},
        )
    return t.view(length, num_heads, width // num_heads).transpose(0, 1)  # (H, T, d_head)


def _join_heads(t: torch.Tensor) -> torch.Tensor:
    num_heads, length, head_dim = t.shape
    return t.transpose(0, 1).reshape(length, num_heads * head_dim)  # (T, H*d_head)


def _check_matrix(name: str, w: torch.Tensor, rows: int) -> None:
    if w.dim() != 2:
        raise SpecError(
            f"{name} must be a matrix, got shape {tuple(w.shape)}", field=f"projection.{name}"
        )
    if w.shape[0] != rows:
        raise SpecError(
            f"{name} has {w.shape[0]} rows but its input has width {rows}",
            field=f"projection.{name}",
        )


def multi_head_attention(
    x: torch.Tensor,
    projections: Projections,
    num_heads: int = 1,
    source: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> AttentionTrace:
    """Attention of the tokens ``x`` over ``source`` (default: ``x`` itself).

    Shapes: x (T, d_in), source (S, d_in) -> trace with output (T, d_out).
    ``scale=None`` is ``1/sqrt(d_k)`` with d_k the per-head width.
    """
    if num_heads < 1:
        raise SpecError(f"num_heads must be at least 1, got {num_heads}", field="num_heads")
    kv_input = x if source is None else source
    _check_matrix("W_query", projections.W_query, x.shape[1])
    _check_matrix("W_key", projections.W_key, kv_input.shape[1])
    _check_matrix("W_value", projections.W_value, kv_input.shape[1])
    if projections.W_query.shape[1] != projections.W_key.shape[1]:
        raise SpecError(
            f"W_query and W_key must have the same number of columns, got "
            f"{projections.W_query.shape[1]} and {projections.W_key.shape[1]}",
            field="projection.W_key",
        )

    queries = x @ projections.W_query  # (T, d_k_total)
    keys = kv_input @ projections.W_key  # (S, d_k_total)
    values = kv_input @ projections.W_value  # (S, d_v_total)
    q = _split_heads(queries, num_heads, "query/key")  # (H, T, d_k)
    k = _split_heads(keys, num_heads, "query/key")  # (H, S, d_k)
    v = _split_heads(values, num_heads, "value")  # (H, S, d_v)

    steps = attention_with_steps(q, k, v, is_causal=is_causal, scale=scale)
    concat = _join_heads(steps.context_vec)  # (T, H*d_v)
    if projections.W_out is None:
        output = concat
    else:
        _check_matrix("W_out", projections.W_out, concat.shape[1])
        output = concat @ projections.W_out
    return AttentionTrace(
        x=x,
        source=kv_input,
        q=q,
        k=k,
        v=v,
        attn_scores=steps.attn_scores,
        scaled_scores=steps.scaled_scores,
        masked_scores=steps.masked_scores,
        attn_weights=steps.attn_weights,
        context_vec=steps.context_vec,
        concat=concat,
        output=output,
        scale=steps.scale,
        causal=is_causal,
        cross=source is not None,
    )


def causal_average(x: torch.Tensor) -> AttentionTrace:
    """Uniform causal averaging: token t gets the mean of tokens 0..t.

    The first step of seeds 000/003, before attention learns its weights.
    Shown as a trace whose scores are all zero, so its weights are exactly a
    softmax over a causally masked zero matrix (tests check that equality).
    Shapes: x (T, d) -> output (T, d).
    """
    num_tokens = x.shape[0]
    weights = uniform_causal_weights(num_tokens)[None]  # (1, T, T)
    zeros = torch.zeros_like(weights)
    upper = ~torch.ones(num_tokens, num_tokens, dtype=torch.bool).tril()
    masked = zeros.masked_fill(upper, float("-inf"))
    values = x[None]  # (1, T, d)
    context = weights @ values  # (1, T, d)
    return AttentionTrace(
        x=x,
        source=x,
        q=torch.zeros(1, num_tokens, 0),
        k=torch.zeros(1, num_tokens, 0),
        v=values,
        attn_scores=zeros,
        scaled_scores=zeros,
        masked_scores=masked,
        attn_weights=weights,
        context_vec=context,
        concat=context[0],
        output=context[0],
        scale=1.0,
        causal=True,
        cross=False,
    )
