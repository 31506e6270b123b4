"""A model registry that sees only the checkpoints a test names: no package, built-in,
Hugging Face cache (unless given) or environment models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attention_core.models import ModelRegistry


def registry_of(*paths: Path, **options: Any) -> ModelRegistry:
    """A registry of the checkpoints under ``paths``, with ``options`` as ModelRegistry's."""
    return ModelRegistry(include_package=False, builtin_dir=None, env_paths=list(paths), **options)
