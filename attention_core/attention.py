"""The attention math, once, with every intermediate step kept.

Shaped like ``torch.nn.functional.scaled_dot_product_attention``: the same
arguments, the same defaults (scale ``1/sqrt(d_k)``, a boolean mask where True
means "may attend", a causal mask aligned to the top-left), but it returns the
steps as well as the result.  Nothing else in the project computes a softmax
over scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .errors import SpecError


@dataclass(frozen=True)
class CoreSteps:
    """The steps every attention call has, and the scale it used: what a lesson shows.

    Shapes (``...`` is any leading batch/head dims, L queries, S keys):
    attn_scores, scaled_scores, masked_scores, attn_weights: (..., L, S);
    context_vec: (..., L, D_v).  ``AttentionSteps`` (one call), ``AttentionTrace``
    (a toy layer) and ``HeadTrace`` (one real head) extend it.
    """

    attn_scores: torch.Tensor
    scaled_scores: torch.Tensor
    masked_scores: torch.Tensor
    attn_weights: torch.Tensor
    context_vec: torch.Tensor
    scale: float


@dataclass(frozen=True)
class AttentionSteps(CoreSteps):
    """Every tensor one attention call computes: the ``CoreSteps`` and these.

    ``allowed`` is the boolean mask actually applied, (L, S) or broadcastable,
    or None when nothing was masked.

    The optional steps exist only when their input was given (None otherwise):
    ``biased_scores`` (..., L, S) = scaled + ``score_bias`` (T5's relative
    positions, ALiBi); ``capped_scores`` (..., L, S) = ``softcap *
    tanh(previous / softcap)`` (Gemma 2); ``sink_weights`` (..., L) is the
    weight each query gave its head's attention sink (gpt-oss), the extra
    logit column the softmax saw and that was dropped after: the rows of
    ``attn_weights`` then sum to 1 - ``sink_weights``.  ``masked_scores`` is
    always what the softmax read (without the sink column).
    """

    allowed: torch.Tensor | None
    biased_scores: torch.Tensor | None = None
    capped_scores: torch.Tensor | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None
    sink_weights: torch.Tensor | None = None


# Causal attention over at least twice this many queries mixes the values in row blocks.
CAUSAL_BLOCK_ROWS = 128


def causal_mask(num_queries: int, num_keys: int) -> torch.Tensor:
    """Boolean (L, S) mask, True where query i may attend to key j (j <= i)."""
    return torch.ones(num_queries, num_keys, dtype=torch.bool).tril()


def uniform_causal_weights(num_tokens: int) -> torch.Tensor:
    """The "bag of words" weights: a row-normalized ``tril`` of ones, (T, T)."""
    tril = torch.tril(torch.ones(num_tokens, num_tokens))
    return tril / tril.sum(dim=1, keepdim=True)


def _mask_bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``allowed`` as an additive bias: 0 where a query may attend, -inf where not.

    Adding it masks exactly as ``torch.where(allowed, scores, -inf)`` does for
    finite scores, and its backward is the gradient itself (``where``'s is a second
    masked pass): a third of the masking's cost in training.
    """
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, float("-inf"))


def _combined_mask(
    attn_mask: torch.Tensor | None, is_causal: bool, num_queries: int, num_keys: int
) -> torch.Tensor | None:
    allowed = causal_mask(num_queries, num_keys) if is_causal else None
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool:
            raise SpecError(
                f"attn_mask must be boolean (True = may attend), got dtype {attn_mask.dtype}",
                field="attn_mask",
            )
        allowed = attn_mask if allowed is None else allowed & attn_mask
    return allowed


def _check_shapes(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    if query.shape[-1] != key.shape[-1]:
        raise SpecError(
            f"query width ({query.shape[-1]}) must equal key width ({key.shape[-1]})",
            field="projection",
        )
    if key.shape[-2] != value.shape[-2]:
        raise SpecError(
            f"keys ({key.shape[-2]}) and values ({value.shape[-2]}) must have the same length",
            field="projection",
        )


def _allowed(
    attn_mask: torch.Tensor | None, is_causal: bool, num_queries: int, num_keys: int
) -> torch.Tensor | None:
    """The combined mask (None: every key), checked to leave every query a key."""
    allowed = _combined_mask(attn_mask, is_causal, num_queries, num_keys)
    # A causal mask alone lets every query see key 0: only other masks need the check.
    if allowed is not None and (attn_mask is not None or num_keys == 0):
        if not bool(allowed.any(dim=-1).all()):
            raise SpecError(
                "every query must be allowed to attend to at least one key", field="attn_mask"
            )
    return allowed


_KeptScores = tuple[
    torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor
]


def _kept_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    group: int,
    scale_factor: float,
    score_bias: torch.Tensor | None,
    softcap: float | None,
    allowed: torch.Tensor | None,
) -> _KeptScores:
    """Each step before the softmax as a tensor of its own: the raw, scaled, biased
    (None without a bias), capped (None without a cap) and masked scores."""
    attn_scores = _scores(query, key, group)
    scaled_scores = attn_scores * scale_factor
    biased_scores = None if score_bias is None else scaled_scores + score_bias
    unmasked = scaled_scores if biased_scores is None else biased_scores
    capped_scores = None if softcap is None else _soft_cap(unmasked, softcap)
    unmasked = unmasked if capped_scores is None else capped_scores
    masked_scores = unmasked if allowed is None else unmasked + _mask_bias(allowed, unmasked.dtype)
    return attn_scores, scaled_scores, biased_scores, capped_scores, masked_scores


def attention_with_steps(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    score_bias: torch.Tensor | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
    keep_steps: bool = True,
    keep_weights: bool = True,
) -> AttentionSteps:
    """Scaled dot-product attention that keeps its intermediate tensors.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, E_v) ->
    context_vec (..., L, E_v).  ``scale=None`` means ``1/sqrt(E)``; pass
    ``1.0`` for no scaling.

    As in SDPA, ``dropout_p`` drops weights (always: pass 0 outside training)
    before they multiply the values; ``attn_weights`` is kept as the softmax
    gave it.  ``enable_gqa`` lets key/value carry fewer heads than the query
    (grouped-query attention): query (..., H_q, L, E) with key and value
    (..., H_kv, S, E), H_q a multiple of H_kv, query head h reading kv head
    ``h // (H_q // H_kv)``; every step is returned per query head.

    Beyond SDPA, each a step of its own and applied only when given, in this
    order after scaling: ``score_bias`` (broadcastable to (..., L, S)) is
    added to the scores; ``softcap`` caps them to (-softcap, softcap) with
    ``softcap * tanh(s / softcap)``; then the mask; ``sinks`` (H_q,), one
    logit per query head, joins each row as an extra column of the softmax
    and is dropped after it (the weights it took are ``sink_weights``).

    ``keep_steps=False`` (a blocked pass, which reads the weights and the
    context only): the same weights and context, bit for bit, with every step
    before the softmax done in place in one scores tensor (and a mask applied
    only to the columns it hides); ``attn_scores``, ``scaled_scores`` and
    ``masked_scores`` are then empty, ``biased_scores`` and ``capped_scores`` None.

    ``keep_weights=False`` (a forward that reads the context only: ablation, the
    logit lens, attribution): where ``context_fuses`` (no mask tensor, score bias,
    soft-cap, sinks or dropout) no step is kept, not even the weights, and the
    context comes from torch's fused kernel (flash attention), which never holds a
    (L, S) map; the same context to float rounding.  Elsewhere it is ``keep_steps=False``.
    """
    _check_shapes(query, key, value)
    scale_factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    group = _query_group(query, key) if enable_gqa else 1
    if not keep_weights and context_fuses(attn_mask, dropout_p, score_bias, softcap, sinks):
        return _fused_context(query, key, value, is_causal, scale_factor, group)
    num_queries, num_keys = query.shape[-2], key.shape[-2]
    if softcap is not None and not softcap > 0:
        raise SpecError(f"softcap is {softcap}; it must be positive", field="softcap")
    allowed = _allowed(attn_mask, is_causal, num_queries, num_keys)
    if keep_steps and keep_weights:
        kept = _kept_scores(query, key, group, scale_factor, score_bias, softcap, allowed)
        attn_scores, scaled_scores, biased_scores, capped_scores, masked_scores = kept
        softmax_input = masked_scores
    else:
        # A power of two scales q exactly as it would scale the scores: one pass fewer.
        early = math.frexp(scale_factor)[0] == 0.5
        scores = _scores(query * scale_factor if early else query, key, group)
        late = 1.0 if early else scale_factor
        softmax_input = _in_place(scores, late, score_bias, softcap, allowed)
        attn_scores = scaled_scores = masked_scores = query.new_empty(0)
        biased_scores = capped_scores = None
    sink_weights = None
    if sinks is None:
        attn_weights = torch.softmax(softmax_input, dim=-1)
    else:
        attn_weights, sink_weights = _softmax_with_sinks(softmax_input, sinks)
    del softmax_input  # the lean path's one scores tensor goes before the context is made
    mixing = F.dropout(attn_weights, p=dropout_p) if dropout_p > 0.0 else attn_weights
    return AttentionSteps(
        attn_scores=attn_scores,
        scaled_scores=scaled_scores,
        masked_scores=masked_scores,
        attn_weights=attn_weights,
        context_vec=_context(mixing, value, group, is_causal),
        scale=scale_factor,
        allowed=allowed,
        biased_scores=biased_scores,
        capped_scores=capped_scores,
        softcap=None if softcap is None else float(softcap),
        sinks=sinks,
        sink_weights=sink_weights,
    )


def context_fuses(
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    score_bias: object,
    softcap: float | None,
    sinks: torch.Tensor | None,
) -> bool:
    """Whether a context-only call goes to torch's fused kernel: only a causal triangle
    (or nothing) hides keys, and no step of ours sits between the scores and the softmax."""
    extras = (attn_mask, score_bias, softcap, sinks)
    return all(extra is None for extra in extras) and dropout_p == 0.0


def _fused_context(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    is_causal: bool,
    scale_factor: float,
    group: int,
) -> AttentionSteps:
    """The context alone, from ``F.scaled_dot_product_attention`` (causal top-left
    aligned, as here)."""
    context = F.scaled_dot_product_attention(
        query, key, value, is_causal=is_causal, scale=scale_factor, enable_gqa=group > 1
    )
    return context_steps(query, context, None, scale_factor)


def context_steps(
    query: torch.Tensor, context: torch.Tensor, weights: torch.Tensor | None, scale: float
) -> AttentionSteps:
    """``AttentionSteps`` holding the context (and the weights, when kept) only."""
    empty = query.new_empty(0)
    return AttentionSteps(
        attn_scores=empty,
        scaled_scores=empty,
        masked_scores=empty,
        attn_weights=empty if weights is None else weights,
        context_vec=context,
        scale=scale,
        allowed=None,
    )


def _broadcasts_to(shape: torch.Size, target: torch.Size) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` without growing it."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target), strict=False))


def _context(
    mixing: torch.Tensor, value: torch.Tensor, group: int, is_causal: bool
) -> torch.Tensor:
    """``mixing @ value`` (..., H_q, L, E_v); query head h reads kv head h // group."""
    if is_causal and mixing.shape[-2] >= 2 * CAUSAL_BLOCK_ROWS:
        return _causal_context(mixing, value, group)
    if group == 1:
        return mixing @ value  # (..., L, E_v)
    return (_group_rows(mixing, group) @ value).view(*mixing.shape[:-1], value.shape[-1])


def _scores(query: torch.Tensor, key: torch.Tensor, group: int) -> torch.Tensor:
    """``query @ key^T``, (..., H_q, L, S); each kv head's G query heads as one (G*L)-row
    matrix (no copy of the keys)."""
    if group == 1:
        return query @ key.transpose(-2, -1)  # (..., L, S)
    return (_group_rows(query, group) @ key.transpose(-2, -1)).view(
        *query.shape[:-1], key.shape[-2]
    )


def _in_place(
    scores: torch.Tensor,
    scale: float,
    score_bias: torch.Tensor | None,
    softcap: float | None,
    allowed: torch.Tensor | None,
) -> torch.Tensor:
    """``scores`` scaled, biased, capped and masked in place: the same operations on the
    same numbers as the kept steps (x + 0 is x, x + -inf is -inf: a masked fill), the
    mask applied to the columns where it hides something only (a causal block's last)."""
    for other in (score_bias, allowed):  # one with more (or longer) leading axes: grow to it
        if other is not None and not _broadcasts_to(other.shape, scores.shape):
            scores = (scores + scores.new_zeros(other.shape)).contiguous()
    if scale != 1.0:
        scores.mul_(scale)
    if score_bias is not None:
        scores.add_(score_bias)
    if softcap is not None and scores.requires_grad:  # tanh's backward reads its output
        scores = torch.tanh(scores / softcap) * softcap
    elif softcap is not None:
        scores.div_(softcap).tanh_().mul_(softcap)
    if allowed is None:
        return scores
    hidden = ~allowed
    columns = hidden.reshape(-1, hidden.shape[-1]).any(dim=0).nonzero()
    if columns.numel():
        first = int(columns[0, 0])
        scores[..., first:].masked_fill_(hidden[..., first:], float("-inf"))
    return scores


def _soft_cap(scores: torch.Tensor, softcap: float) -> torch.Tensor:
    """Gemma 2's logit soft-capping: smoothly squashes scores into (-softcap, softcap)."""
    return torch.tanh(scores / softcap) * softcap


def _softmax_with_sinks(
    logits: torch.Tensor, sinks: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over each row plus its head's sink logit; the sink's share dropped after.

    Shapes: logits (..., H, L, S), sinks (H,) -> weights (..., H, L, S), sink
    weights (..., H, L).
    """
    if logits.dim() < 3 or sinks.shape != (logits.shape[-3],):
        raise SpecError(
            f"sinks must hold one logit per head, shape ({logits.shape[-3]},); "
            f"got {tuple(sinks.shape)}",
            field="sinks",
        )
    column = sinks.to(logits.dtype).view(-1, 1, 1).expand(*logits.shape[:-1], 1)  # (..., H, L, 1)
    probs = torch.softmax(torch.cat([logits, column], dim=-1), dim=-1)  # (..., H, L, S + 1)
    return probs[..., :-1], probs[..., -1]


def _causal_context(mixing: torch.Tensor, value: torch.Tensor, group: int) -> torch.Tensor:
    """``mixing @ value`` for causal weights, skipping the zeros above the diagonal.

    Query i attends to keys 0..i only, so its weights beyond i are exact zeros:
    rows r0..r1 need only the first r1 values.  In blocks of at least
    ``CAUSAL_BLOCK_ROWS`` rows (up to 8 blocks) this skips 44% of the multiply
    at L = 1024.  Shapes: mixing (..., H_q, L, S), value (..., H_kv, S, E_v) ->
    (..., H_q, L, E_v); query head h reads kv head h // group.
    """
    length = mixing.shape[-2]
    if group > 1:
        *batch, heads, _, keys = mixing.shape
        mixing = mixing.view(*batch, heads // group, group, length, keys)  # (..., H_kv, G, L, S)
        value = value.unsqueeze(-3)  # (..., H_kv, 1, S, E_v): shared by the group
    blocks = min(8, length // CAUSAL_BLOCK_ROWS)
    step = -(-length // blocks)
    parts = [
        mixing[..., start : start + step, : start + step] @ value[..., : start + step, :]
        for start in range(0, length, step)
    ]  # each (..., rows, E_v)
    context = torch.cat(parts, dim=-2)  # (..., L, E_v)
    return context.flatten(-4, -3) if group > 1 else context  # (..., H_q, L, E_v)


def _group_rows(t: torch.Tensor, group: int) -> torch.Tensor:
    """Stack each run of ``group`` consecutive heads' rows into one matrix."""
    *batch, heads, rows, width = t.shape
    return t.reshape(*batch, heads // group, group * rows, width)  # (..., H/G, G*L, X)


def _query_group(query: torch.Tensor, key: torch.Tensor) -> int:
    """Query heads per key/value head (1 when the head counts are equal)."""
    if query.dim() < 3 or key.dim() != query.dim():
        raise SpecError(
            "enable_gqa needs query and key shaped (..., heads, length, width)",
            field="num_key_value_heads",
        )
    num_q_heads, num_kv_heads = query.shape[-3], key.shape[-3]
    if num_q_heads % num_kv_heads:
        raise SpecError(
            f"grouped-query attention needs the query heads ({num_q_heads}) to be a multiple "
            f"of the key/value heads ({num_kv_heads})",
            field="num_key_value_heads",
        )
    return num_q_heads // num_kv_heads
