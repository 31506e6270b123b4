"""The wheel, built once per session and installed into a fresh venv (devtools/wheel.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.wheel import build_wheel, fresh_venv


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path  # the fresh venv's interpreter
    bin: Path
    outside: Path  # a working directory outside the checkout


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(base)
    python = fresh_venv(base / "venv", wheel)
    outside = base / "elsewhere"
    outside.mkdir()
    yield Installed(wheel, python, python.parent, outside)
