"""Issue 20 item 12 and issue 24 item 11: what /openapi.json says of POST /api/train is what
the server does.

Its 4xx answers are JSON (not ``text/event-stream``); its 200 is a stream of
``TrainEventMessage``s, whose models every event of real runs validates against;
schema bounds are the server's (the seed maximum a double holds exactly, token
lists of at least one token).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator
from pydantic import TypeAdapter

from app.main import create_app
from app.schemas.attention import MAX_SEED
from app.schemas.train_events import TRAIN_EVENTS, TrainEventMessage
from app.settings import Settings
from tests.api.test_train_api import TINY, parse_sse


@pytest.fixture(scope="module")
def openapi(client: TestClient) -> dict[str, Any]:
    document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def resolved(openapi: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of ``schema`` whose ``#/components/...`` references resolve in the document."""
    return Draft202012Validator({**openapi, **schema})


def test_train_errors_are_documented_as_json(openapi: dict[str, Any]) -> None:
    responses = openapi["paths"]["/api/train"]["post"]["responses"]
    errors = {code: r for code, r in responses.items() if code.startswith("4") or code == "503"}
    assert set(errors) == {"400", "413", "415", "422", "429", "503"}
    for code, response in errors.items():
        assert list(response["content"]) == ["application/json"], code
        schema = response["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, code
    assert "ErrorBody" in openapi["components"]["schemas"]
    assert list(responses["200"]["content"]) == ["text/event-stream"]


def test_train_error_answers_are_the_documented_json(client: TestClient, openapi: dict) -> None:
    responses = openapi["paths"]["/api/train"]["post"]["responses"]
    answers = {
        "400": client.post(
            "/api/train", content=b"{", headers={"content-type": "application/json"}
        ),
        "415": client.post("/api/train", content=b"x", headers={"content-type": "text/csv"}),
        "422": client.post("/api/train", json={"n_layer": -1}),
    }
    for code, answer in answers.items():
        assert str(answer.status_code) == code
        assert answer.headers["content-type"] == "application/json"
        (media_type,) = responses[code]["content"]
        assert media_type == "application/json"
        errors = list(
            resolved(openapi, responses[code]["content"][media_type]["schema"]).iter_errors(
                answer.json()
            )
        )
        assert not errors, errors


def test_the_events_are_models_in_the_schema(openapi: dict[str, Any]) -> None:
    content = openapi["paths"]["/api/train"]["post"]["responses"]["200"]["content"]
    ref = {"$ref": "#/components/schemas/TrainEventMessage"}
    assert content["text/event-stream"] == {"schema": ref}  # of each message
    schemas = openapi["components"]["schemas"]
    mapping = schemas["TrainEventMessage"]["discriminator"]["mapping"]
    assert (
        set(mapping)
        == set(TRAIN_EVENTS)
        == {
            "start",
            "progress",
            "snapshot",
            "sample",
            "done",
            "error",
        }
    )
    for name, model in TRAIN_EVENTS.items():
        assert model.__name__ in schemas, name
        assert schemas[model.__name__]["additionalProperties"] is False


@pytest.fixture(scope="module")
def train_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(
        runs_dir=str(tmp_path_factory.mktemp("runs")),
        train_concurrent=4,
        train_max_parameters=200_000,
        train_nice=0,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def events_of(client: TestClient, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    with client.stream("POST", "/api/train", json=body) as response:
        assert response.status_code == 200
        return parse_sse(response.iter_lines())


def test_every_event_a_run_sends_validates(train_client: TestClient, openapi: dict) -> None:
    events = events_of(train_client, TINY)
    events += events_of(train_client, {**TINY, "architecture": "bigram", "max_steps": 2})
    seen = {name for name, _ in events}
    assert seen == {"start", "progress", "snapshot", "sample", "done"}
    message_schema = resolved(openapi, {"$ref": "#/components/schemas/TrainEventMessage"})
    for name, data in events:
        # The pydantic models (strict: no unknown field), and the published JSON schema.
        TypeAdapter(TRAIN_EVENTS[name]).validate_python(data)
        TrainEventMessage.model_validate({"event": name, "data": data})
        errors = list(message_schema.iter_errors({"event": name, "data": data}))
        assert not errors, (name, errors[:3])


def test_the_error_event_validates(tmp_path: Path, openapi: dict) -> None:
    settings = Settings(runs_dir=str(tmp_path), train_max_seconds=0.5, train_nice=0)
    with TestClient(create_app(settings)) as client:
        events = events_of(client, {**TINY, "max_steps": 5000})
    name, data = events[-1]
    assert name == "error" and data["detail"][0]["type"] == "limit_exceeded"
    TrainEventMessage.model_validate({"event": name, "data": data})


def test_a_changed_event_fails_validation() -> None:
    """The check is not vacuous: an unknown field or a missing one is refused."""
    done = {
        "step": 6,
        "name": "gpt-1",
        "model_url": "/model?model=gpt-1",
        "val_loss": 2.0,
        "train_loss": 2.0,
        "untrained_val_loss": 3.0,
        "baseline_val_loss": 2.5,
        "elapsed_s": 1.0,
    }
    TrainEventMessage.model_validate({"event": "done", "data": done})
    for bad in ({**done, "extra": 1}, {k: v for k, v in done.items() if k != "val_loss"}):
        with pytest.raises(ValueError):
            TrainEventMessage.model_validate({"event": "done", "data": bad})


def schema_properties(openapi: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(schema name, property, its schema) of every component and request body schema."""
    bodies = {
        f"{path} {method}": op["requestBody"]["content"][media]["schema"]
        for path, ops in openapi["paths"].items()
        for method, op in ops.items()
        if "requestBody" in op
        for media in op["requestBody"]["content"]
    }
    for where, schema in [*openapi["components"]["schemas"].items(), *bodies.items()]:
        for prop, sub in schema.get("properties", {}).items():
            for option in sub.get("anyOf", [sub]):
                yield where, prop, option


def test_every_seed_maximum_is_exact_in_a_double(openapi: dict[str, Any]) -> None:
    maxima = [
        s["maximum"]
        for _, prop, s in schema_properties(openapi)
        if prop == "seed" and "maximum" in s
    ]
    for op in openapi["paths"].values():
        for operation in op.values():
            for param in operation.get("parameters", []):
                if param["name"] == "seed":
                    maxima.append(param["schema"]["maximum"])
    assert len(maxima) >= 6
    for maximum in maxima:
        # A validator comparing doubles accepts exactly the integers the server accepts.
        assert maximum == MAX_SEED == int(float(maximum))
        assert float(MAX_SEED + 511) == float(MAX_SEED)  # rounds down: still ≤ 2**63 - 1
    assert float(2**63 + 191) > float(MAX_SEED)


def test_the_server_keeps_the_seed_maximum(client: TestClient) -> None:
    def attention(seed: int) -> int:
        body = {"tokens": ["bank"], "embedding": {"kind": "hashed", "dim": 4, "seed": seed}}
        return client.post("/api/attention", json=body).status_code

    assert attention(MAX_SEED) == 200
    assert attention(MAX_SEED + 1) == 422
    assert attention(2**63 + 191) == 422
    assert (
        client.get(f"/api/lessons/scaling?dims=2&trials=2&seed={MAX_SEED + 1}").status_code == 422
    )
    refused = client.post("/api/train", json={"seed": MAX_SEED + 1})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "seed"]


@pytest.mark.parametrize(
    "body",
    [
        {"tokens": []},
        {"tokens": ["bank"], "source_tokens": []},
    ],
)
def test_empty_token_lists_are_refused_as_the_schema_says(
    client: TestClient, openapi: dict, body: dict[str, Any]
) -> None:
    token_lists = {
        (where, prop): s
        for where, prop, s in schema_properties(openapi)
        if where.endswith("Request")
        and prop in ("tokens", "tokens_a", "tokens_b", "source_tokens")
        and s.get("type") == "array"
    }
    assert set(token_lists) == {
        ("AttentionRequest", "tokens"),
        ("AttentionRequest", "source_tokens"),
        ("CompareRequest", "tokens_a"),
        ("CompareRequest", "tokens_b"),
    }
    assert all(s.get("minItems") == 1 for s in token_lists.values()), token_lists
    response = client.post("/api/attention", json=body)
    assert response.status_code == 422
    (field,) = [k for k, v in body.items() if v == []]
    assert response.json()["detail"][0]["loc"] == ["body", field]
    compare = client.post("/api/compare", json={"tokens_a": [], "tokens_b": ["bank"]})
    assert compare.status_code == 422
