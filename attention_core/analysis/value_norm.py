"""Value-weighted maps (Kobayashi et al., EMNLP 2020, "Attention is not only a weight").

What head h moves from token j into token i is α_ij · f(x_j) with
f(x_j) = v_j W_O^h, the value vector through the head's slice of the output
projection (the bias, shared by all heads, left out).  Its norm
‖α_ij f(x_j)‖ = α_ij ‖f(x_j)‖ shows when a large weight carries little: a
token that gets much attention but whose transformed value is short.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..models.base.outputs import LayerTrace
from ..models.base.protocols import TextModel
from ..models.base.result_cache import ResultCache
from ..models.maps.text_maps import MapFeatures
from ..progress import muted, report
from .head_models import head_model


def value_weighted(weights: torch.Tensor, values: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """‖α_ij · v_j W_O^h‖ per head.

    Shapes: weights (H, T, S), values (H_kv, S, D) (query head h reads kv head
    h // (H / H_kv)), out (H, D, C) -> (H, T, S).
    """
    H, H_kv = weights.shape[0], values.shape[0]
    per_head = values.repeat_interleave(H // H_kv, dim=0)  # (H, S, D)
    lengths = torch.linalg.vector_norm(per_head @ out, dim=-1)  # (H, S): ‖f(x_j)‖
    weighted: torch.Tensor = weights * lengths[:, None, :]
    return weighted


def trace_value_weighted(trace: LayerTrace, out: torch.Tensor) -> torch.Tensor:
    """The first sequence of one layer's trace -> (H, T, S)."""
    return value_weighted(trace.steps.attn_weights[0], trace.v[0], out)


def row_shares(maps: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum (a row of zeros stays zero), so rows sum to 1 like weights."""
    totals = maps.sum(dim=-1, keepdim=True)
    return maps / totals.clamp_min(torch.finfo(maps.dtype).tiny)


def value_norm_maps(
    model: TextModel, text: str, layers: Sequence[int], text_b: str | None = None
) -> dict[int, torch.Tensor]:
    """0-based layer -> (H, T, T) value-weighted maps of ``text`` (one forward per layer).

    Progress: ``value_norm`` after each layer (each one's forward is not reported).
    """
    heads = head_model(model)
    result: dict[int, torch.Tensor] = {}
    with torch.inference_mode():
        for done, layer in enumerate(layers, start=1):
            with muted():
                _, trace = model.trace(text, layer, text_b)
            result[layer] = trace_value_weighted(trace, heads.out_weights(layer))
            report("value_norm", done, len(layers))
    return result


@dataclass(frozen=True)
class ValueNormMaps(MapFeatures):
    """A text's maps with each weight replaced by its value-weighted norm, each row divided
    by its sum (so rows sum to 1 like weights, and the rollout and the pages' colour scales
    apply unchanged); tokens and hidden states as the plain maps give them."""

    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    token_type_ids: tuple[int, ...]
    layer_attentions: tuple[torch.Tensor, ...]
    layer_hidden_states: tuple[torch.Tensor, ...]


_cache_lock = threading.Lock()
_caches: weakref.WeakKeyDictionary[
    TextModel, tuple[threading.Lock, ResultCache[tuple[str, str | None], ValueNormMaps]]
] = weakref.WeakKeyDictionary()


def value_norm_shares(model: TextModel, text: str, text_b: str | None = None) -> ValueNormMaps:
    """Every layer's value-weighted maps as row shares (one forward pass per layer).

    Kept per model for the next requests (a page asks for one layer at a time, and
    the rollout needs every layer); one text is computed at a time per model, so
    requests for its other layers wait for it instead of computing it again.
    """
    with _cache_lock:
        lock, cache = _caches.setdefault(model, (threading.Lock(), ResultCache()))
    with lock:
        found = cache.get((text, text_b))
        if found is None:
            found = _value_norm_shares(model, text, text_b)
            cache.put((text, text_b), found)
    return found


def _value_norm_shares(model: TextModel, text: str, text_b: str | None) -> ValueNormMaps:
    plain = model.encode(text, text_b)
    count = len(plain.layer_attentions)
    weighted = value_norm_maps(model, text, range(count), text_b)
    return ValueNormMaps(
        tokens=plain.tokens,
        special=plain.special,
        token_type_ids=plain.token_type_ids,
        layer_attentions=tuple(row_shares(weighted[n]) for n in range(count)),
        layer_hidden_states=plain.layer_hidden_states,
    )
