"""Issue 32 item 12: the OpenAPI document's integer bounds are the server's, as integers,
and an integer field takes what JSON Schema calls an integer (``413.0`` as ``413``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from app.schemas.attention import MAX_SEED


def integer_schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "integer":
            yield node
        for value in node.values():
            yield from integer_schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from integer_schemas(value)


def test_every_integer_bound_is_written_as_the_servers_integer(client: TestClient) -> None:
    text = client.get("/openapi.json").text
    assert text.count(f'"maximum":{MAX_SEED}') >= 6  # 9223372036854774784, not 9.22…e+18
    document = json.loads(text)  # a JSON integer parses as int, a "1024.0" as float
    bounds = [
        s[key]
        for s in integer_schemas(document)
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        if key in s
    ]
    assert len(bounds) > 20
    assert all(type(b) is int for b in bounds), [b for b in bounds if type(b) is not int]
    assert MAX_SEED in bounds and float(MAX_SEED) not in [b for b in bounds if type(b) is float]
    pool = document["components"]["schemas"]["ModelAttentionRequest"]["properties"]["pool"]
    assert pool["anyOf"][0] == {"type": "integer", "maximum": 1024, "minimum": 1}


def test_an_integer_field_takes_a_whole_float(client: TestClient) -> None:
    schema = {"type": "integer", "maximum": 1024, "minimum": 1}
    assert Draft202012Validator(schema).is_valid(413.0)  # JSON Schema: an integer
    body = {"tokens": ["bank", "river"], "embedding": {"kind": "hashed", "dim": 4.0, "seed": 7.0}}
    whole = client.post("/api/attention", json=body)
    assert whole.status_code == 200, whole.text
    plain = client.post(
        "/api/attention",
        json={"tokens": ["bank", "river"], "embedding": {"kind": "hashed", "dim": 4, "seed": 7}},
    )
    assert whole.json() == plain.json()
    for bad in (4.5, True, "4"):
        refused = client.post(
            "/api/attention", json={**body, "embedding": {"kind": "hashed", "dim": bad}}
        )
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"][-1] == "dim"
