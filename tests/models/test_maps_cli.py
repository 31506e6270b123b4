"""``attention-viz maps``: a checkpoint and a text in, every map pooled out (.npz, .json),
equal to POST /api/model/attention with the same ``pool``; progress per layer on stderr."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app import cli
from app.main import create_app
from app.settings import Settings, get_settings
from tests.models.checkpoints import make_gpt2
from tests.models.cli_environment import clean_environment  # noqa: F401 (autouse)
from tests.requires import require

NAME = "maps-gpt2"
TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 17)
POOL = 32


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    return make_gpt2(tmp_path_factory.mktemp("maps") / NAME, n_positions=400, seed=3, n_layer=3)


@pytest.fixture(scope="module")
def api_answer(model_dir: Path) -> dict[str, Any]:
    settings = Settings(models=str(model_dir), hf_cache=False)
    with TestClient(create_app(settings)) as client:
        response = client.post(
            "/api/model/attention", json={"model": NAME, "text": TEXT, "pool": POOL}
        )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_npz_equals_the_api_pooled_maps(
    model_dir: Path, tmp_path: Path, api_answer: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "maps.npz"
    argv = ["maps", str(model_dir), "--text", TEXT, "--pool", str(POOL), "--out", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    # stderr is not a terminal here: one plain line per layer of the forward pass (the
    # model's own reports, as it runs); the maps are pooled inside the pass, at any length.
    assert printed.err == "".join(f"forward layer {n}/3\n" for n in (1, 2, 3))
    T = len(api_answer["tokens"])
    side = api_answer["pooled"]["shape"][0]
    assert 280 <= T and side <= POOL
    assert f"{T} tokens, 3 layers x 4 heads, maps pooled to {side} x {side}" in printed.out
    with np.load(out) as saved:
        meta = json.loads(str(saved["meta"]))
        assert meta["pooled"] == api_answer["pooled"]
        assert meta["tokens"] == api_answer["tokens"] == list(saved["tokens"])
        assert saved["attentions"].shape == (3, 4, side, side)
        for key in ("attentions", "head_average", "rollout"):
            np.testing.assert_allclose(saved[key], np.array(api_answer[key]), rtol=0, atol=1e-6)


def test_json_and_quiet(
    model_dir: Path, tmp_path: Path, api_answer: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "maps.json"
    argv = ["maps", str(model_dir), "--text", TEXT, "--pool", str(POOL), "--out", str(out)]
    assert cli.main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    saved = json.loads(out.read_text())
    assert saved["model"] == NAME and saved["pooled"] == api_answer["pooled"]
    np.testing.assert_allclose(saved["rollout"], api_answer["rollout"], rtol=0, atol=1e-6)


def test_bad_input_exits_2_naming_the_problem(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "maps.npz")
    assert cli.main(["maps", str(model_dir), "--text", "a", "--pool", "0", "--out", out]) == 2
    assert "--pool 0: it needs 1 to 1024 cells a side" in capsys.readouterr().err
    assert cli.main(["maps", str(model_dir), "--text", "a", "--out", str(tmp_path / "m.csv")]) == 2
    assert "write a .npz or a .json file" in capsys.readouterr().err
    assert cli.main(["maps", str(tmp_path / "none"), "--text", "a", "--out", out]) == 2
    assert "no such directory" in capsys.readouterr().err
    long_text = " ".join(["the bank"] * 400)  # past the model's 400 positions
    assert cli.main(["maps", str(model_dir), "--text", long_text, "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attention-viz maps: ") and "400" in err, err
    assert not Path(out).exists()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_one_redrawn_bar(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    out = tmp_path / "maps.npz"
    text = TEXT + " on a terminal"  # not in a result cache: the forward pass runs and reports
    assert cli.main(["maps", str(model_dir), "--text", text, "--out", str(out)]) == 0
    lines = terminal.getvalue().split("\n")
    assert lines[-1] == ""  # each stage's line ends once it is full
    frames = lines[0].split("\r")[1:]  # each report redraws the line from its start
    assert frames == [
        f"[{'#' * round(24 * n / 3):-<24}] {'forward':<7} layer {n}/3" for n in (1, 2, 3)
    ]
    assert len(lines) == 2  # one stage: the forward pass pools as it goes


def test_a_long_input_is_pooled_block_by_block(
    model_dir: Path,
    tmp_path: Path,
    api_answer: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES", "0")  # every input is long
    get_settings.cache_clear()
    out = tmp_path / "long.npz"
    argv = ["maps", str(model_dir), "--text", TEXT, "--pool", str(POOL), "--out", str(out)]
    assert cli.main(argv) == 0
    # Pooled inside the pass: the bar shows the forward's layers only.
    assert capsys.readouterr().err == "".join(f"forward layer {n}/3\n" for n in (1, 2, 3))
    with np.load(out) as saved:
        meta = json.loads(str(saved["meta"]))
        assert meta["pooled"] == api_answer["pooled"] and "rollout_note" not in meta
        for key in ("attentions", "head_average", "rollout"):
            np.testing.assert_allclose(saved[key], np.array(api_answer[key]), rtol=0, atol=1e-6)
