"""The two checks API tests make of every call (a 200 and its JSON, or one error item), and
a module's app on its own models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def served(models: Path, **settings: Any) -> Iterator[TestClient]:
    """A module's client (a generator for its fixture): the app listing the models under
    ``models`` (no Hugging Face cache scan), with ``settings``, its registry built (the
    first request builds it: tests that load a model from it first need it, whichever of
    them runs alone)."""
    with TestClient(create_app(Settings(models=str(models), hf_cache=False, **settings))) as client:
        assert client.get("/api/models").status_code == 200
        yield client


def post(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to ``path``; its JSON answer, asserting a 200."""
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def error(response: Any, status: int = 422) -> dict[str, Any]:
    """The one error item of ``response``, asserting its ``status``."""
    assert response.status_code == status, response.text
    (detail,) = response.json()["detail"]
    return detail
