"""POST /api/expand writes every seeded or looked-up number out, without changing the result."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from attention_core import PRESETS


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app()) as c:
        yield c


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_expanded_request_gives_the_same_trace(client: TestClient, name: str) -> None:
    spec = client.get(f"/api/presets/{name}").json()["spec"]
    expanded = client.post("/api/expand", json=spec)
    assert expanded.status_code == 200
    body = expanded.json()
    assert body["embedding"]["kind"] == "explicit"
    assert body["projection"]["kind"] in {"identity", "explicit"}
    assert body == client.get(f"/api/presets/{name}").json()["expanded"]
    original = client.post("/api/attention", json=spec).json()
    again = client.post("/api/attention", json=body).json()
    assert again["output"] == original["output"]
    assert again["heads"] == original["heads"]


def test_expand_rejects_what_attention_rejects(client: TestClient) -> None:
    response = client.post("/api/expand", json={"tokens": ["river"]})
    assert response.status_code == 422
    assert "river" in response.json()["detail"][0]["msg"]
