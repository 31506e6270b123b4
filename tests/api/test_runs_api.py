"""GET /api/runs lists the saved runs with their settings and losses; DELETE /api/runs/{name}
removes a run of ours and nothing else (other directories, links, names that reach out)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from attention_core.errors import SpecError
from attention_core.training import preset_config, train
from attention_core.training.runs import run_directory

torch.set_num_threads(1)
TINY = {"n_layer": 1, "n_embd": 16, "block_size": 16, "batch_size": 4, "eval_iters": 2}


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished run (2 steps), copied into each test's runs directory."""
    directory = tmp_path_factory.mktemp("made") / "tiny-run"
    config = preset_config(
        "gpt", {**TINY, "max_steps": 2, "eval_every": 2, "sample_chars": 0, "probe": "the bank"}
    )
    for _ in train(config, save_to=directory, run_info={"name": "tiny-run"}):
        pass
    return directory


@pytest.fixture
def runs_dir(tmp_path: Path, made_run: Path) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(made_run, runs / "tiny-run")
    return runs


@pytest.fixture
def client(runs_dir: Path) -> TestClient:
    with TestClient(create_app(Settings(runs_dir=str(runs_dir), train_nice=0))) as c:
        yield c


def test_runs_are_listed_with_their_settings_and_losses(client: TestClient, runs_dir: Path) -> None:
    body = client.get("/api/runs").json()
    assert body["runs_dir"] == str(runs_dir) and body["keep"] == 20
    (run,) = body["runs"]
    training = json.loads((runs_dir / "tiny-run" / "training.json").read_text())
    assert run["name"] == "tiny-run" and run["model_url"] == "/model?model=tiny-run"
    assert run["config"] == training["config"] and run["config"]["n_embd"] == 16
    assert run["steps"] == 2 and run["architecture"] == "gpt"
    assert run["val_loss"] == training["val_loss"] and run["train_loss"] == training["train_loss"]
    # The model list gives a run's probe, which /model opens it with.
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert models["tiny-run"]["probe"] == "the bank"


def test_delete_removes_a_run_from_disk_and_from_the_model_list(
    client: TestClient, runs_dir: Path
) -> None:
    loaded = client.post("/api/model/attention", json={"model": "tiny-run", "text": "the bank"})
    assert loaded.status_code == 200, loaded.text
    answer = client.delete("/api/runs/tiny-run")
    assert answer.status_code == 200 and answer.json() == {"deleted": "tiny-run"}
    assert not (runs_dir / "tiny-run").exists()
    assert client.get("/api/runs").json()["runs"] == []
    assert "tiny-run" not in {m["name"] for m in client.get("/api/models").json()["models"]}
    again = client.delete("/api/runs/tiny-run")
    assert again.status_code == 404 and again.json()["detail"][0]["type"] == "run_not_found"


def test_delete_refuses_what_is_not_a_run_of_ours(client: TestClient, runs_dir: Path) -> None:
    (runs_dir / "notes").mkdir()
    (runs_dir / "notes" / "a.txt").write_text("keep me")
    (runs_dir / "foreign").mkdir()
    (runs_dir / "foreign" / "training.json").write_text('{"format": "someone else"}')
    (runs_dir / "file.txt").write_text("keep me")
    (runs_dir / "link").symlink_to(runs_dir / "tiny-run", target_is_directory=True)
    for name, reason in [
        ("notes", "is not a training run of attention-viz"),
        ("foreign", "is not a training run of attention-viz"),
        ("file.txt", "is not a training run of attention-viz"),
        ("link", "is a symbolic link"),
    ]:
        answer = client.delete(f"/api/runs/{name}")
        assert answer.status_code == 409, (name, answer.text)
        detail = answer.json()["detail"][0]
        assert detail["loc"] == ["path", "name"] and reason in detail["msg"], name
    for name in (".hidden", "..%2Ftiny-run", "%2E%2E"):
        answer = client.delete(f"/api/runs/{name}")
        assert answer.status_code in (404, 422), (name, answer.text)
    # Everything is still there; the link's target too, and the listing skips the others.
    assert (runs_dir / "notes" / "a.txt").read_text() == "keep me"
    assert (runs_dir / "file.txt").exists() and (runs_dir / "foreign").is_dir()
    assert (runs_dir / "link").is_symlink() and (runs_dir / "tiny-run" / "training.json").exists()
    assert [r["name"] for r in client.get("/api/runs").json()["runs"]] == ["tiny-run"]


def test_run_names_that_reach_outside_the_runs_directory_are_refused(runs_dir: Path) -> None:
    outside = runs_dir.parent / "outside"
    shutil.copytree(runs_dir / "tiny-run", outside)
    for name in ("../outside", "..", "/etc", "tiny-run/../../outside", ".tiny"):
        with pytest.raises(SpecError, match="must be 1-100 letters"):
            run_directory(runs_dir, name)
    assert (outside / "training.json").exists()


def test_facts_of_the_wrong_type_are_left_out_and_named(client: TestClient, runs_dir: Path) -> None:
    """A shared runs directory may hold a training.json edited by hand or by another version:
    its facts of the wrong type are dropped and named, never a 500, never passed on."""
    shutil.copytree(runs_dir / "tiny-run", runs_dir / "odd-run")
    path = runs_dir / "odd-run" / "training.json"
    training = json.loads(path.read_text())
    training.update(steps="many", val_loss="low", parameters=True, vocab_size=3.5, config=[1])
    path.write_text(json.dumps(training))
    answer = client.get("/api/runs")
    assert answer.status_code == 200, answer.text
    odd = next(run for run in answer.json()["runs"] if run["name"] == "odd-run")
    assert odd["unreadable"] == ["steps", "val_loss", "parameters", "vocab_size"]
    assert not {"steps", "val_loss", "parameters", "vocab_size"} & set(odd)
    assert odd["config"] == {} and odd["train_loss"] == training["train_loss"]
    assert odd["architecture"] == "gpt"
    tiny = next(run for run in answer.json()["runs"] if run["name"] == "tiny-run")
    assert "unreadable" not in tiny and tiny["steps"] == 2
