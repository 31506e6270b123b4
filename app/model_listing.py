"""``GET /api/models``'s answer: every model the registry sees, as ``ModelList``."""

from __future__ import annotations

from dataclasses import asdict, fields

from attention_core.models import ModelEntry, ModelRegistry
from attention_core.models.checkpoints.model_size import Sizes
from attention_core.models.registry.backends import capture_path
from attention_core.models.registry.model_registry import is_default
from attention_core.training.runs import run_probe

from .schemas.model import ModelList, ModelSummary

UNREAD_SIZES: dict[str, None] = dict.fromkeys(f.name for f in fields(Sizes))


def listed(entry: ModelEntry, registry: ModelRegistry, default: str | None) -> ModelSummary:
    """One entry of the listing (its sizes null when its config.json could not be read)."""
    supported = entry.supported
    return ModelSummary.model_validate(
        {
            "name": entry.name,
            "source": entry.source,
            "default": entry.name == default,
            "family": entry.family,
            "causal": entry.causal,
            "backend": entry.backend,
            "kind": entry.kind,
            "capture": capture_path(entry.backend, entry.family) if supported else None,
            **(asdict(entry.sizes) if entry.sizes else UNREAD_SIZES),
            "parameters": entry.parameters,
            "dtype": entry.dtype,
            "held_bytes": entry.held_bytes,
            "device": registry.device.type if supported else None,
            "placement": entry.placement.describe() if entry.placement else None,
            "loaded": registry.is_loaded(entry),
            "supported": supported,
            "reason": entry.reason,
            "probe": run_probe(entry.path) if supported else None,
        }
    )


def listing(registry: ModelRegistry) -> ModelList:
    """``GET /api/models``'s body (the model page renders its picker from it too)."""
    entries = registry.entries()
    default = next((e.name for e in entries if is_default(e)), None)
    return ModelList(default=default, models=[listed(e, registry, default) for e in entries])
