"""An autouse fixture for modules that run the command line in-process.

Import it into a test module (``from tests.models.cli_environment import
clean_environment``) and pytest uses it there: the CLI's own variable reset,
no Hugging Face cache scan, and an empty runs directory (the default one,
``~/.local/share/...``, may hold trained runs), the settings re-read per test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app import cli
from app.settings import get_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # setenv (not delenv): the variable the CLI sets is removed again after each test.
    monkeypatch.setenv(cli.SERVE_MODELS_ENV, "")
    monkeypatch.setenv("ATTENTION_VIZ_HF_CACHE", "false")
    monkeypatch.setenv("ATTENTION_VIZ_RUNS_DIR", str(tmp_path / "runs"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
