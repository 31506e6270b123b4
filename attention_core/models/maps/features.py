"""Pure functions over a model's attention maps, for encoders and decoders alike.

``hide_special`` drops the rows and columns of the tokens that soak up attention
without meaning (an encoder's [CLS]/[SEP], a decoder's BOS and its first token,
the "attention sink") and renormalizes each row, so what is left is how the
other tokens share their attention among themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...errors import SpecError

ROLLOUT_RESIDUAL = 0.5


def head_average(attentions: torch.Tensor) -> torch.Tensor:
    """Mean over heads.  Shapes: (L, H, T, T) -> (L, T, T); (H, T, T) -> (T, T)."""
    return attentions.mean(dim=-3)


def attention_rollout(
    attentions: torch.Tensor | Sequence[torch.Tensor], residual: float = ROLLOUT_RESIDUAL
) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020), cumulative after every layer.

    Each layer's head-averaged map is mixed with the residual connection,
    ``A_l' = normalize_rows((1 - residual) * mean_heads(A_l) + residual * I)``,
    with ``residual = 0.5`` by default (the paper's equal weighting), and the
    layers are multiplied from the bottom up: ``R_l = A_l' @ A_{l-1}' @ … @ A_1'``.
    ``R[l][i, j]`` is how much token i's state after layer l+1 draws on input
    token j; every row sums to 1.

    Shapes: attentions (L, H, T, T), or L tensors (H, T, T) -> rollout (L, T, T);
    the last entry is the full rollout.
    """
    if not 0.0 <= residual <= 1.0:
        raise SpecError(f"residual ({residual}) must be between 0 and 1", field="residual")
    if isinstance(attentions, torch.Tensor):
        averaged = head_average(attentions)  # (L, T, T)
    else:
        averaged = torch.stack([head_average(a) for a in attentions])  # (L, T, T)
    T = averaged.shape[-1]
    mixed = averaged * (1.0 - residual)
    mixed += residual * torch.eye(T, dtype=averaged.dtype)
    mixed /= mixed.sum(dim=-1, keepdim=True)
    result = torch.empty_like(mixed)
    result[0] = mixed[0]
    for layer in range(1, mixed.shape[0]):
        torch.matmul(mixed[layer], result[layer - 1], out=result[layer])
    return result


def hidden_tokens(special: Sequence[bool], first: bool = True) -> tuple[bool, ...]:
    """Which tokens "hide special and first tokens" hides: the special ones, and position 0.

    Decoders put most of their attention on the first token whatever it is
    (BOS or not); for an encoder the first token is [CLS], special anyway.
    """
    return tuple(bool(s) or (first and i == 0) for i, s in enumerate(special))


def hide_special(weights: torch.Tensor, hidden: Sequence[bool]) -> torch.Tensor:
    """Drop the rows and columns flagged in ``hidden``, renormalize rows to 1.

    ``hidden`` is usually ``hidden_tokens(special)``.  A row whose kept weights
    are all zero stays zero (nothing to renormalize).
    Shapes: (..., T, T) -> (..., K, K), K = number of tokens kept.
    """
    if len(hidden) != weights.shape[-1]:
        raise SpecError(
            f"hidden has {len(hidden)} flags for {weights.shape[-1]} tokens", field="special"
        )
    keep = torch.tensor([not s for s in hidden])
    if not bool(keep.any()):
        raise SpecError(
            "every token is a special or the first token; nothing is left to show "
            "(turn hide_special off, or give a longer text)",
            field="hide_special",
        )
    index = keep.nonzero().squeeze(-1)  # (K,)
    kept = weights.index_select(-2, index).index_select(-1, index)  # (..., K, K)
    totals = kept.sum(dim=-1, keepdim=True)
    return kept / totals.clamp_min(torch.finfo(kept.dtype).tiny)


def kept_tokens(tokens: Sequence[str], special: Sequence[bool]) -> tuple[str, ...]:
    return tuple(t for t, s in zip(tokens, special, strict=True) if not s)
