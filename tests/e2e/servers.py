"""A server of its own for an e2e module: the checkpoints under one directory, listed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from devtools.server import serving
from tests.models.checkpoints import make_gpt2
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

MARIAN = "tiny-marian"


@contextmanager
def models_server(models: Path, **settings: str) -> Iterator[str]:
    """uvicorn listing the checkpoints under ``models`` (no Hugging Face cache scan),
    with ``settings`` (environment variables) added; its base URL."""
    env = {"ATTENTION_VIZ_MODELS": str(models), "ATTENTION_VIZ_HF_CACHE": "0", **settings}
    with serving(env) as url:
        yield url


def built_in_and_gpt2(factory: pytest.TempPathFactory, name: str) -> Iterator[str]:
    """A module's server (a generator for its fixture): the built-in models (tiny-bank-gpt,
    MiniLM) and a random GPT-2 listed; its base URL."""
    root = factory.mktemp(name)
    make_gpt2(root / "tiny-gpt2")
    with models_server(root) as url:
        yield url


def marian(
    factory: pytest.TempPathFactory, name: str, model: str = MARIAN, **options: Any
) -> Iterator[str]:
    """A module's server (a generator for its fixture) listing one small random Marian,
    ``model``, that transformers writes (``options``: its config's); its base URL."""
    require("transformers")
    root = factory.mktemp(name)
    make_seq2seq(root / model, "marian", **options)
    with models_server(root) as url:
        yield url
