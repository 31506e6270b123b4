"""A server of its own for an e2e module: the checkpoints under one directory, listed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devtools.server import serving


@contextmanager
def models_server(models: Path, **settings: str) -> Iterator[str]:
    """uvicorn listing the checkpoints under ``models`` (no Hugging Face cache scan),
    with ``settings`` (environment variables) added; its base URL."""
    env = {"ATTENTION_VIZ_MODELS": str(models), "ATTENTION_VIZ_HF_CACHE": "0", **settings}
    with serving(env) as url:
        yield url
