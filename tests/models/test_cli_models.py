"""``attention-viz serve --model PATH`` and ``attention-viz models``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from app import cli
from app.settings import get_settings
from tests.models.cli_environment import clean_environment  # noqa: F401 (autouse)


def test_models_lists_what_the_registry_sees(
    checkpoints: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["models", "--model", str(checkpoints / "tiny-gpt2"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["source"], r["default"]) for r in rows] == [
        ("sentence-transformers/all-MiniLM-L6-v2", "package", True),
        ("tiny-bank-gpt", "builtin", False),  # trained by `attention-viz train` (issue 11)
        ("tiny-gpt2", "cli", False),
    ]
    assert rows[2]["path"] == str(checkpoints / "tiny-gpt2")
    assert cli.main(["models", "--model", str(checkpoints)]) == 0
    table = capsys.readouterr().out
    assert "  tiny-gpt2-bf16  [cli]  gpt2   2 layers x 4 heads, " in table
    assert table.startswith("* sentence-transformers/all-MiniLM-L6-v2  [package]  bert")


def test_a_missing_model_path_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["models", "--model", "/no/such/dir"]) == 2
    assert "--model /no/such/dir: no such directory" in capsys.readouterr().err


def test_serve_hands_every_model_path_to_the_app(
    checkpoints: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_run(app: str, **options: Any) -> None:
        calls.append({"app": app, "settings": get_settings(), **options})

    monkeypatch.setattr("uvicorn.run", fake_run)
    first, second = checkpoints / "tiny-gpt2", tmp_path
    assert cli.main(["serve", "--model", str(first), "--model", str(second), "--port", "9"]) == 0
    (call,) = calls
    assert call["app"] == "app.main:create_app" and call["port"] == 9
    assert call["settings"].serve_models == os.pathsep.join([str(first), str(second)])
    assert cli.main(["serve", "--model", str(tmp_path / "absent")]) == 2
    assert len(calls) == 1
