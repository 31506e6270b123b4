"""The app's one ``ModelRegistry``, built from the settings in the app's lifespan.

Building it reads nothing from disk; every listing rescans the sources
(cheaply, see ``attention_core.models.registry``), a request resolves its model's
name in one scan, and models load on first use, at most
``ATTENTION_VIZ_LOADED_MODELS`` at a time.

Memory: on glibc, the lifespan also raises malloc's mmap and trim thresholds
(``keep_freed_memory``).  A 512-token layer allocates three 12 MB (heads, T, T)
tensors; by default glibc serves each from a fresh mmap, and the page faults
cost ~20-25% of the forward pass.  With the thresholds raised, freed blocks
are reused instead; up to 256 MB of freed memory may stay resident.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request

from attention_core.models import ModelEntry, ModelRegistry, TextModel
from attention_core.models.base.device import check_device
from attention_core.models.checkpoints.weight_dtype import check_dtype
from attention_core.models.registry.discovery import hf_cache_dir, split_paths

from .settings import Settings

# glibc mallopt parameters (malloc.h) and the values keep_freed_memory sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD_BYTES = 256 * 2**20
MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc's maximum on 64-bit


def keep_freed_memory() -> bool:
    """Let glibc reuse freed large blocks instead of unmapping them (see the module doc).

    Process-wide; returns False (and does nothing) where glibc is not the allocator.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
            and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        )
    except (OSError, AttributeError):
        return False


def build_registry(settings: Settings) -> ModelRegistry:
    """Every source the settings name (see ``attention_core.models.discovery``)."""
    return ModelRegistry(
        default_dir=Path(settings.model_dir).expanduser() if settings.model_dir else None,
        cli_paths=split_paths(settings.serve_models),
        env_paths=split_paths(settings.models),
        runs_dir=settings.runs_path(),  # where POST /api/train saves (the default too)
        hf_cache=hf_cache_dir() if settings.hf_cache else None,
        max_loaded=settings.loaded_models,
        max_tokens=settings.model_max_tokens,
        long_cache_bytes=settings.model_long_cache_bytes,
        max_model_bytes=settings.max_model_bytes,
        device=check_device(settings.device),
        dtype=check_dtype(settings.dtype),
        offload=settings.offload,
        offload_dir=Path(settings.offload_dir).expanduser() if settings.offload_dir else None,
    )


def get_registry(request: Request) -> ModelRegistry:
    """``app.state.models`` (``main.lifespan`` builds it)."""
    registry: ModelRegistry = request.app.state.models
    return registry


RegistryDep = Annotated[ModelRegistry, Depends(get_registry)]


def load(registry: ModelRegistry, name: str | None) -> tuple[ModelEntry, TextModel]:
    """The entry and the loaded model called ``name`` (None: the default)."""
    entry = registry.entry(name)
    return entry, registry.load_entry(entry)
