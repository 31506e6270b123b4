"""``GET /api/models``: every model the server can see, supported or not (and why not)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from attention_core.models import ModelEntry, ModelRegistry
from attention_core.models.registry.backends import capture_path
from attention_core.models.registry.model_registry import is_default
from attention_core.training.runs import run_probe

from ..model_registry import RegistryDep
from ..schemas.model import ModelList
from .common import json_response

router = APIRouter(prefix="/api/models", tags=["model"])


def summary(entry: ModelEntry, registry: ModelRegistry, default: str | None) -> dict[str, Any]:
    sizes = entry.sizes
    return {
        "name": entry.name,
        "source": entry.source,
        "default": entry.name == default,
        "family": entry.family,
        "causal": entry.causal,
        "backend": entry.backend,
        "kind": entry.kind,
        "capture": capture_path(entry.backend, entry.family) if entry.supported else None,
        "layers": sizes.layers if sizes else None,
        "heads": sizes.heads if sizes else None,
        "kv_heads": sizes.kv_heads if sizes else None,
        "hidden_size": sizes.hidden_size if sizes else None,
        "head_dim": sizes.head_dim if sizes else None,
        "max_positions": sizes.max_positions if sizes else None,
        "vocab_size": sizes.vocab_size if sizes else None,
        "parameters": entry.parameters,
        "dtype": entry.dtype,
        "held_bytes": entry.held_bytes,
        "device": registry.device.type if entry.supported else None,
        "placement": entry.placement.describe() if entry.placement else None,
        "loaded": registry.is_loaded(entry),
        "supported": entry.supported,
        "reason": entry.reason,
        "probe": run_probe(entry.path) if entry.supported else None,
    }


@router.get("", response_model=ModelList)
def list_models(registry: RegistryDep) -> Response:
    """Every model: the built-in MiniLM, shipped checkpoints, ``--model`` paths,
    ``ATTENTION_VIZ_MODELS``, trained runs and the local Hugging Face cache.

    Reads only config.json and safetensors headers; a model that cannot be
    used is listed with ``supported: false`` and the ``reason``.
    """
    return json_response(listing(registry))


def listing(registry: ModelRegistry) -> dict[str, Any]:
    """``GET /api/models``'s body (the model page renders its picker from it too)."""
    entries = registry.entries()
    default = next((e.name for e in entries if is_default(e)), None)
    return {"default": default, "models": [summary(e, registry, default) for e in entries]}
