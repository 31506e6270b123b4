"""The answer cache: repeats skip the computation, errors and big bodies never hit it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.cache import ResponseCache
from app.main import create_app
from app.routes import api
from app.settings import Settings

FLAGSHIP = {"tokens": ["stream", "bank", "mud"], "scale": "none"}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = api._trace

    def counting(body):  # noqa: ANN001, ANN202
        calls.append(1)
        return real(body)

    monkeypatch.setattr(api, "_trace", counting)
    return calls


def test_repeat_is_served_from_cache_with_identical_bytes(counted: list[int]) -> None:
    with TestClient(create_app()) as client:
        first = client.post("/api/attention", json=FLAGSHIP)
        second = client.post("/api/attention", json=FLAGSHIP)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert second.headers["content-security-policy"] == first.headers["content-security-policy"]
    assert len(counted) == 1


def test_different_body_is_computed(counted: list[int]) -> None:
    with TestClient(create_app()) as client:
        a = client.post("/api/attention", json=FLAGSHIP).json()
        b = client.post("/api/attention", json={**FLAGSHIP, "causal": True}).json()
    assert len(counted) == 2
    assert a["heads"][0]["attn_weights"][0][2] > 0
    assert b["heads"][0]["attn_weights"][0][2] == 0


def test_errors_are_not_cached(counted: list[int]) -> None:
    with TestClient(create_app()) as client:
        for _ in range(2):
            response = client.post("/api/attention", json={"tokens": ["nope"]})
            assert response.status_code == 422
    assert len(counted) == 2


def test_disabled_cache_computes_every_time(counted: list[int]) -> None:
    with TestClient(create_app(Settings(response_cache_entries=0))) as client:
        client.post("/api/attention", json=FLAGSHIP)
        client.post("/api/attention", json=FLAGSHIP)
    assert len(counted) == 2


def test_lru_evicts_oldest_and_bounds_bytes() -> None:
    cache = ResponseCache(max_entries=2, max_bytes=800)
    for name in ("a", "b", "c"):
        cache.put(("/p", name.encode()), [], b"x" * 10)
    assert cache.get(("/p", b"a")) is None
    assert cache.get(("/p", b"c")) is not None
    cache.put(("/p", b"huge"), [], b"x" * 200)  # over max_bytes // 8: never stored
    assert cache.get(("/p", b"huge")) is None
    assert cache.size <= 800


def test_cached_answers_stay_correct_with_and_without_gzip() -> None:
    """A cached answer large enough to be gzipped must decode for every client."""
    with TestClient(create_app()) as client:
        spec = client.get("/api/presets/gpt-head-32d").json()["spec"]
        answers = []
        for encoding in ("gzip", "identity", "gzip", "identity", "gzip"):
            response = client.post(
                "/api/attention", json=spec, headers={"accept-encoding": encoding}
            )
            assert response.status_code == 200
            assert (response.headers.get("content-encoding") == "gzip") == (encoding == "gzip")
            answers.append(response.json())
    assert all(a == answers[0] for a in answers)
