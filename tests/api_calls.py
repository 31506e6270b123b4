"""The two checks API tests make of every call: a 200 and its JSON, or one error item."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


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
