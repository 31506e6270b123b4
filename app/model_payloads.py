"""Model results as API bodies: attention maps (json or compact) and one head's trace.

Plain dicts and float32 numpy arrays, serialized by orjson (``-inf`` as null).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from attention_core.models import (
    HeadTrace,
    ModelUnsupported,
    encode_compact,
)
from attention_core.models.base.protocols import ModelSummary
from attention_core.models.maps.map_grid import MapGrid, MapQuery, shown
from attention_core.models.maps.text_maps import TokenizedLike

from .limits import over_limit
from .map_view import describe
from .schemas.model import MapOptions
from .steps import HEAD_STEPS

# JSON floats cost ~10 bytes each: beyond this, ask for format "compact" or fewer layers.
MAX_JSON_WEIGHTS = 2_000_000
# What a client is told sets that limit (a constant, not an environment setting).
JSON_WEIGHTS_SETTING = "MAX_JSON_WEIGHTS"


def float_array(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as a contiguous float32 numpy array, which the responses write as numbers."""
    return np.ascontiguousarray(tensor.detach().numpy(), dtype=np.float32)


def map_json(tensor: torch.Tensor, options: MapOptions) -> object:
    """Weights in the request's ``format``: numbers, or a ``compact`` description."""
    if options.format == "compact":
        return encode_compact(tensor, options.dtype).describe()
    return float_array(tensor)


def require_attention(model: str, info: ModelSummary) -> None:
    """Refuse (422) to show the attention of a model whose ``info()`` has 0 ``layers``."""
    if info.layers == 0:
        raise ModelUnsupported(
            f"{model!r} has no attention layers (0 layers, as a trained bigram: no token "
            "reads another), so there is no attention to show; "
            "POST /api/model/generate still writes text with it",
            field="model",
        )


def check_json_maps(numbers: int, layers: int, tokens: str) -> None:
    """A 413 on ``format`` when maps of ``layers`` layers of ``tokens`` (their count
    in words) would carry more than ``MAX_JSON_WEIGHTS`` numbers as JSON."""
    if numbers > MAX_JSON_WEIGHTS:
        raise over_limit(
            ["body", "format"],
            f"format 'json' would carry {numbers} numbers for {layers} layers of "
            f"{tokens}; the limit is {MAX_JSON_WEIGHTS}: use format 'compact' or ask for "
            "fewer layers",
            limit=MAX_JSON_WEIGHTS,
            found=numbers,
            setting=JSON_WEIGHTS_SETTING,
        )


def head_numbers(trace: HeadTrace) -> int:
    """How many numbers the JSON of one head's trace carries."""
    tensors = [trace.x, trace.q, trace.k, trace.v, trace.context_vec]
    tensors += [trace.attn_scores] * 4
    tensors += [t for t in (trace.q_unrotated, trace.k_unrotated) if t is not None]
    tensors += [t for t in (trace.biased_scores, trace.capped_scores) if t is not None]
    return sum(t.numel() for t in tensors)


def check_head_numbers(numbers: int, tokens: int) -> None:
    """A 422 on ``pool`` when one head's trace would be over ``MAX_JSON_WEIGHTS`` numbers."""
    if numbers > MAX_JSON_WEIGHTS:
        raise over_limit(
            ["body", "pool"],
            f"this head's trace is {numbers} numbers for {tokens} tokens; the limit is "
            f"{MAX_JSON_WEIGHTS}: ask with pool or a smaller rows/cols region",
            limit=MAX_JSON_WEIGHTS,
            found=numbers,
            setting=JSON_WEIGHTS_SETTING,
        )


def head_payload(
    trace: HeadTrace, tokens: tuple[str, ...], special: tuple[bool, ...], *, model: str, family: str
) -> dict[str, Any]:
    """``ModelHeadResponse``: one head in /api/attention's shape, layer and head 1-based."""
    check_head_numbers(head_numbers(trace), len(tokens))
    rope = trace.q_unrotated is not None
    steps: dict[str, np.ndarray | None] = {
        name: float_array(getattr(trace, name)) for name in HEAD_STEPS
    }
    steps["q_unrotated"] = float_array(trace.q_unrotated) if trace.q_unrotated is not None else None
    steps["k_unrotated"] = float_array(trace.k_unrotated) if trace.k_unrotated is not None else None
    for name in ("biased_scores", "capped_scores", "sink_weights"):
        value = getattr(trace, name)
        steps[name] = None if value is None else float_array(value)
    return {
        "model": model,
        "family": family,
        "layer": trace.layer + 1,
        "head": trace.head + 1,
        "kv_head": trace.kv_head + 1,
        "rope": rope,
        "qk_norm": trace.qk_norm,
        "tokens": list(tokens),
        "source_tokens": list(tokens),
        "special": list(special),
        "mode": "attention",
        "num_heads": 1,
        "causal": trace.causal,
        "cross": False,
        "scale": trace.scale,
        "softcap": trace.softcap,
        "shapes": {
            "x": list(trace.x.shape),
            "q": list(trace.q.shape),
            "k": list(trace.k.shape),
            "v": list(trace.v.shape),
            "attn_weights": list(trace.attn_weights.shape),
            "context_vec": list(trace.context_vec.shape),
        },
        "x": float_array(trace.x),
        "source": None,
        "heads": [steps],
        "output": None,
    }


def pooled(maps: torch.Tensor, query: MapQuery) -> torch.Tensor:
    """One full (T, S) map (a rollout) as ``query`` shows it."""
    return shown(maps[None], query)[0]


def maps_fields(
    tokens: TokenizedLike,
    positions: list[int],
    query: MapQuery,
    body: MapOptions,
    layers: list[int],
    heads: int,
    grids: list[MapGrid],
    rollout: torch.Tensor | Sequence[torch.Tensor] | None,
    rollout_layers: list[int],
) -> dict[str, Any]:
    """``MapsResponse``'s fields of one stack's rows (``tokens``: they and their
    ``token_type_ids``), written once for a text's answer and a generated one's."""
    type_ids = getattr(tokens, "token_type_ids", None) or (0,) * len(tokens.tokens)
    return {
        "tokens": [tokens.tokens[i] for i in positions],
        "token_type_ids": [type_ids[i] for i in positions],
        "positions": positions,
        "all_tokens": list(tokens.tokens),
        "special": list(tokens.special),
        "hide_special": body.hide_special,
        "layers": layers,
        "heads": heads,
        "format": body.format,
        "attentions": [map_json(g.heads, body) for g in grids],
        "head_average": (
            [map_json(g.average, body) for g in grids if g.average is not None]
            if body.head_average
            else None
        ),
        "rollout": None
        if rollout is None
        else [map_json(pooled(rollout[n - 1], query), body) for n in rollout_layers],
        **describe(query, body.pool is not None, heads, (len(positions), len(positions))),
    }
