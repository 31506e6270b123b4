"""A trained run enters the model registry like any other checkpoint: GET /api/models lists
it (and the shipped tiny-bank-gpt), and the model API serves it by the name /model's link gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api.test_train_api import TINY, stream


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    runs: Path = tmp_path_factory.mktemp("runs")
    with TestClient(create_app(Settings(runs_dir=str(runs), train_nice=0))) as c:
        yield c


def test_a_trained_run_is_listed_by_get_api_models(client: TestClient) -> None:
    done = stream(client, json=TINY)[-1][1]
    listing = client.get("/api/models")
    assert listing.status_code == 200
    models = {m["name"]: m for m in listing.json()["models"]}
    entry = models[done["name"]]
    assert entry["source"] == "runs" and entry["supported"] is True
    assert entry["family"] == "gpt2" and entry["causal"] is True
    assert (entry["layers"], entry["heads"], entry["hidden_size"]) == (1, 2, 16)
    assert entry["max_positions"] == 16
    assert "tiny-bank-gpt" in models and models["tiny-bank-gpt"]["source"] == "builtin"
    # Its attention through the model API, by name.
    answer = client.post(
        "/api/model/attention", json={"model": done["name"], "text": "Kim rowed", "format": "json"}
    )
    assert answer.status_code == 200, answer.text


def test_the_done_link_names_a_model_the_model_api_serves(client: TestClient) -> None:
    """/model?model=<name> opens, and what that page asks the API for by name is there."""
    done = stream(client, json=TINY)[-1][1]
    assert client.get(done["model_url"]).status_code == 200
    info = client.get("/api/model", params={"model": done["name"]})
    assert info.status_code == 200, info.text
    assert info.json()["name"] == done["name"]
    generated = client.post(
        "/api/model/generate",
        json={"model": done["name"], "prompt": "Kim rowed", "max_new_tokens": 4},
    )
    assert generated.status_code == 200, generated.text


def test_only_the_newest_runs_are_kept(tmp_path: Path) -> None:
    """ATTENTION_VIZ_RUNS_KEEP=2: after three runs the first is gone, from disk and the listing."""
    settings = Settings(runs_dir=str(tmp_path), runs_keep=2, train_nice=0)
    with TestClient(create_app(settings)) as client:
        names = [stream(client, json={**TINY, "max_steps": 1})[-1][1]["name"] for _ in range(3)]
        listed = {m["name"] for m in client.get("/api/models").json()["models"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:])
    assert names[0] not in listed and set(names[1:]) <= listed
