"""``show``'s maps for a model of the registry, by the server's own builder.

``POST /api/model/attention``'s body (``app.attention_answer``) with ``pool``: one
pass over the kept q/k, one map query gathered block by block, the server's
limits; no (H, T, T) map is held at any length.  Its compact uint8 answer is
the view's section as it is (the same bytes), so ``show`` equals the server's
pooled answer cell for cell.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from attention_core.models.maps.transport import DECODE_DESCRIPTION
from attention_core.models.registry.model_registry import ModelRegistry

from ..attention_answer import attention_answer
from ..schemas.model import CompactTensorOut, ModelAttentionRequest
from ..settings import Settings
from .attentions import block_labels


def _stacked(layers: Sequence[object]) -> dict[str, object]:
    """Per-layer compact uint8 tensors as one (L, …) compact tensor: their bytes in order."""
    parts = [layer for layer in layers if isinstance(layer, CompactTensorOut)]
    if len(parts) != len(layers):
        raise TypeError("expected compact maps")
    data = b"".join(base64.b64decode(p.data) for p in parts)
    return {
        "shape": [len(parts), *parts[0].shape],
        "data": base64.b64encode(data).decode("ascii"),
        **DECODE_DESCRIPTION["uint8"],
    }


def served_section(
    registry: ModelRegistry,
    name: str,
    settings: Settings,
    text: str,
    text_b: str | None,
    pool_above: int,
) -> tuple[str, dict[str, Any]]:
    """The model's name and its one section (``attentions.section_json``'s shape) for
    ``text``, each map max-pooled to at most ``pool_above`` cells a side."""
    body = ModelAttentionRequest(
        model=name, text=text, text_b=text_b, format="compact", dtype="uint8", pool=pool_above
    )
    answer = attention_answer(body, registry, settings)
    block = answer.pooled.block[0] if answer.pooled is not None else 1
    tokens = answer.tokens
    return answer.model, {
        "name": "attention",
        "title": answer.model,
        "queries": list(block_labels(tokens, block)),
        "keys": list(block_labels(tokens, block)),
        "tokens_total": len(tokens),
        "pooled": block,
        "causal": answer.causal,
        "square": True,
        "layers": list(answer.layers),
        "heads": list(range(1, answer.heads + 1)),
        "special": list(answer.special) if block == 1 else None,
        "token_type_ids": list(answer.token_type_ids) if block == 1 else None,
        "maps": _stacked(answer.attentions),
        "mean": _stacked(answer.head_average) if answer.head_average else None,
        "rollout": _stacked(answer.rollout) if answer.rollout else None,
    }
