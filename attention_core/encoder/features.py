"""Pure functions over an encoder's attentions and hidden states."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..errors import SpecError
from .tokenizer import Tokenized

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


def hide_special(weights: torch.Tensor, special: Sequence[bool]) -> torch.Tensor:
    """Drop the rows and columns of special tokens ([CLS], [SEP]), renormalize rows to 1.

    A row whose kept weights are all zero stays zero (nothing to renormalize).
    Shapes: (..., T, T) -> (..., K, K), K = number of non-special tokens.
    """
    if len(special) != weights.shape[-1]:
        raise SpecError(
            f"special has {len(special)} flags for {weights.shape[-1]} tokens", field="special"
        )
    keep = torch.tensor([not s for s in special])
    if not bool(keep.any()):
        raise SpecError("every token is special; nothing is left to show", field="hide_special")
    index = keep.nonzero().squeeze(-1)  # (K,)
    kept = weights.index_select(-2, index).index_select(-1, index)  # (..., K, K)
    totals = kept.sum(dim=-1, keepdim=True)
    return kept / totals.clamp_min(torch.finfo(kept.dtype).tiny)


def kept_tokens(tokens: Sequence[str], special: Sequence[bool]) -> tuple[str, ...]:
    return tuple(t for t, s in zip(tokens, special, strict=True) if not s)


# --- one word in two texts ------------------------------------------------------------


@dataclass(frozen=True)
class WordComparison:
    """``cosines[l]``: cosine of the word's state in text A and text B after layer l
    (0 = embeddings).  ``span_*`` are token index ranges [start, stop)."""

    word: str
    pieces: tuple[str, ...]
    tokens_a: tuple[str, ...]
    tokens_b: tuple[str, ...]
    span_a: tuple[int, int]
    span_b: tuple[int, int]
    cosines: tuple[float, ...]


def find_word(
    tokenized: Tokenized,
    piece_ids: Sequence[int],
    word: str,
    pieces: Sequence[str],
    field: str,
) -> tuple[int, int]:
    """Token span [start, stop) of the first whole-word occurrence of ``piece_ids``.

    Whole word: the span starts where a word starts and ends where it ends, so
    "bank" is not found inside "banking" (bank + ##ing).
    """
    ids, word_ids = tokenized.input_ids, tokenized.word_ids
    n = len(piece_ids)
    target = tuple(piece_ids)
    for start in range(len(ids) - n + 1):
        stop = start + n
        if ids[start:stop] != target or tokenized.special[start]:
            continue
        starts_word = start == 0 or word_ids[start - 1] != word_ids[start]
        ends_word = stop == len(ids) or word_ids[stop] != word_ids[stop - 1]
        if starts_word and ends_word:
            return start, stop
    shown = " ".join(kept_tokens(tokenized.tokens, tokenized.special))
    raise SpecError(
        f"the word {word!r} (WordPieces: {' '.join(pieces)}) does not occur as a whole word "
        f"in {field}, whose tokens are: {shown}",
        field=field,
    )


def layer_cosines(
    hidden_a: Sequence[torch.Tensor],
    hidden_b: Sequence[torch.Tensor],
    span_a: tuple[int, int],
    span_b: tuple[int, int],
) -> tuple[float, ...]:
    """Per layer, cosine of the mean hidden state over each span.

    Shapes: hidden_* L+1 tensors (T_*, hidden) -> L+1 floats.
    """
    a = torch.stack([h[span_a[0] : span_a[1]].mean(dim=0) for h in hidden_a])  # (L+1, hidden)
    b = torch.stack([h[span_b[0] : span_b[1]].mean(dim=0) for h in hidden_b])  # (L+1, hidden)
    cosines = torch.nn.functional.cosine_similarity(a, b, dim=-1).clamp(-1.0, 1.0)
    return tuple(float(c) for c in cosines)
