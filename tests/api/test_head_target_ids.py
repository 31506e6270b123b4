"""target_ids on POST /api/model/head (an encoder-decoder's written target, as ids) is a
one-stack model's 422 naming target_ids, before any work."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api_calls import error


def test_target_ids_are_refused_by_a_one_stack_model(client: TestClient) -> None:
    body = {"text": "the bank", "layer": 1, "head": 1, "target_ids": [1, 2]}
    detail = error(client.post("/api/model/head", json=body))
    assert detail["loc"] == ["body", "target_ids"]
    assert detail["type"] == "spec_error" and "encoder-decoders" in detail["msg"]
