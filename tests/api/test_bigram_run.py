"""A trained ``bigram`` run has no attention layers: the model API says so (422, naming why)
instead of failing (it answered 500), and it still generates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.api.test_train_api import TINY, stream

NO_ATTENTION = "has no attention layers (0 layers, as a trained bigram: no token reads another)"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    runs: Path = tmp_path_factory.mktemp("runs")
    with TestClient(create_app(Settings(runs_dir=str(runs), train_nice=0))) as c:
        yield c


@pytest.fixture(scope="module")
def bigram(client: TestClient) -> str:
    """The name of a bigram run trained through POST /api/train (a few steps)."""
    done = stream(client, json={**TINY, "architecture": "bigram", "max_steps": 3})[-1]
    assert done[0] == "done", done
    return str(done[1]["name"])


def refused(response: Any) -> str:
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "model"] and detail["type"] == "model_unsupported"
    return str(detail["msg"])


def test_it_is_listed_with_no_layers(client: TestClient, bigram: str) -> None:
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert models[bigram]["supported"] is True and models[bigram]["layers"] == 0
    info = client.get("/api/model", params={"model": bigram})
    assert info.status_code == 200 and info.json()["layers"] == 0


@pytest.mark.parametrize("format_", ["json", "compact"])
def test_its_attention_is_refused_with_the_reason(
    client: TestClient, bigram: str, format_: str
) -> None:
    for layers in (None, [1]):
        body = {"model": bigram, "text": "Kim rowed", "format": format_, "layers": layers}
        message = refused(client.post("/api/model/attention", json=body))
        assert message == (
            f"{bigram!r} {NO_ATTENTION}, so there is no attention to show; "
            "POST /api/model/generate still writes text with it"
        )
    head = {"model": bigram, "text": "Kim rowed", "layer": 1, "head": 1}
    assert NO_ATTENTION in refused(client.post("/api/model/head", json=head))


def test_it_still_generates(client: TestClient, bigram: str) -> None:
    answer = client.post(
        "/api/model/generate",
        json={"model": bigram, "prompt": "Kim rowed", "max_new_tokens": 5, "format": "json"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["generated_ids"]) == 5 and body["stop_reason"] == "max_new_tokens"
    assert body["generated_text"] == "".join(body["generated_tokens"])
    assert (body["layers"], body["heads"]) == ([], 0)
    assert body["attentions"] == body["head_average"] == body["rollout"] == []
    assert body["tokens"][-5:] == body["generated_tokens"]
