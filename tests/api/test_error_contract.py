"""Every size over a limit is ``type: limit_exceeded`` with ``ctx`` ``{limit, found, setting}``,
and the other rules a page words itself have a stable type and their numbers in ``ctx``:
clients never need to parse ``msg``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

TOKENS = ["bank", "loan"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    runs = tmp_path_factory.mktemp("runs")
    settings = Settings(runs_dir=str(runs), train_max_parameters=200_000, max_body_bytes=100_000)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def only_error(response: Any, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    (item,) = response.json()["detail"]
    return item


# (method, path, body or query, loc, limit, found, setting)
LIMITS = {
    "tokens": (
        "/api/attention",
        {"tokens": ["bank"] * 70},
        ["body", "tokens"],
        (64, 70, "ATTENTION_VIZ_MAX_TOKENS"),
    ),
    "source tokens": (
        "/api/attention",
        {"tokens": TOKENS, "source_tokens": ["bank"] * 65},
        ["body", "source_tokens"],
        (64, 65, "ATTENTION_VIZ_MAX_TOKENS"),
    ),
    "token chars": (
        "/api/attention",
        {"tokens": ["bank", "x" * 80]},
        ["body", "tokens", 1],
        (64, 80, "ATTENTION_VIZ_MAX_TOKEN_CHARS"),
    ),
    "heads": (
        "/api/attention",
        {"tokens": TOKENS, "num_heads": 20},
        ["body", "num_heads"],
        (16, 20, "ATTENTION_VIZ_MAX_HEADS"),
    ),
    "embedding dim": (
        "/api/attention",
        {"tokens": TOKENS, "embedding": {"kind": "hashed", "dim": 300}},
        ["body", "embedding", "dim"],
        (256, 300, "ATTENTION_VIZ_MAX_DIM"),
    ),
    "vector width": (
        "/api/attention",
        {"tokens": ["a"], "embedding": {"kind": "explicit", "vectors": [[1.0] * 257]}},
        ["body", "embedding", "vectors"],
        (256, 257, "ATTENTION_VIZ_MAX_DIM"),
    ),
    "d_out": (
        "/api/expand",
        {"tokens": TOKENS, "projection": {"kind": "seeded_linear", "d_out": 999}},
        ["body", "projection", "d_out"],
        (256, 999, "ATTENTION_VIZ_MAX_DIM"),
    ),
    "added words": (
        "/api/attention",
        {
            "tokens": TOKENS,
            "embedding": {"kind": "vocabulary", "extra": {f"w{i}": [0.0] * 4 for i in range(257)}},
        },
        ["body", "embedding", "extra"],
        (256, 257, "ATTENTION_VIZ_MAX_VOCABULARY_WORDS"),
    ),
    "model words": (
        "/api/model/embeddings",
        {"words": [f"w{i}" for i in range(300)]},
        ["body", "words"],
        (256, 300, "ATTENTION_VIZ_MAX_VOCABULARY_WORDS"),
    ),
    "max_new_tokens": (
        "/api/model/generate",
        {"prompt": "the bank", "max_new_tokens": 300},
        ["body", "max_new_tokens"],
        (256, 300, "ATTENTION_VIZ_MAX_NEW_TOKENS"),
    ),
    "train layers": (
        "/api/train",
        {"n_layer": 9},
        ["body", "n_layer"],
        (8, 9, "ATTENTION_VIZ_TRAIN_MAX_LAYERS"),
    ),
    "train parameters": (
        "/api/train",
        {"n_embd": 512, "n_layer": 8},
        ["body", "n_embd"],
        (200_000, None, "ATTENTION_VIZ_TRAIN_MAX_PARAMETERS"),
    ),
    "train attention cells": (
        "/api/train",
        {"n_embd": 16, "block_size": 256, "batch_size": 128, "n_head": 16, "n_layer": 4},
        ["body", "batch_size"],
        (8_388_608, 128 * 16 * 256**2 * 4, "ATTENTION_VIZ_TRAIN_MAX_ATTENTION_CELLS"),
    ),
    "train probe": (
        "/api/train",
        {"probe": "x" * 70},
        ["body", "probe"],
        (64, 70, "block_size"),
    ),
}


@pytest.mark.parametrize("case", list(LIMITS))
def test_every_limit_error_carries_limit_found_and_setting(client: TestClient, case: str) -> None:
    path, body, loc, (limit, found, setting) = LIMITS[case]
    item = only_error(client.post(path, json=body))
    assert item["loc"] == loc
    assert item["type"] == "limit_exceeded"
    assert item["ctx"]["limit"] == limit and item["ctx"]["setting"] == setting
    assert item["ctx"]["found"] > limit
    if found is not None:
        assert item["ctx"]["found"] == found
    # The sentence says the same numbers (for a human reading the raw JSON).
    assert str(limit) in item["msg"] and str(item["ctx"]["found"]) in item["msg"]


@pytest.mark.parametrize(
    ("query", "loc", "ctx"),
    [
        ("dims=5000&scores=1&scales=1", ["query", "dims", 0], (4096, 5000, "MAX_LESSON_DIM")),
        ("dims=4&trials=30000&scores=1&scales=1", ["query", "trials"], (20000, 30000, "TRIALS")),
        (
            "&".join(f"dims={d}" for d in range(1, 34)) + "&scores=1&scales=1",
            ["query", "dims"],
            (32, 33, "MAX_LESSON_DIMS"),
        ),
    ],
)
def test_lesson_limits_carry_ctx(client: TestClient, query: str, loc: list, ctx: tuple) -> None:
    item = only_error(client.get(f"/api/lessons/scaling?{query}"))
    limit, found, setting = ctx
    assert item["loc"] == loc and item["type"] == "limit_exceeded"
    assert (item["ctx"]["limit"], item["ctx"]["found"]) == (limit, found)
    assert item["ctx"]["setting"].startswith("ATTENTION_VIZ_")
    assert item["ctx"]["setting"].endswith(setting)


def test_a_body_over_the_size_limit_carries_ctx(client: TestClient) -> None:
    item = only_error(client.post("/api/attention", content=b"x" * 100_001), status=413)
    assert item["type"] == "body_too_large"
    assert item["ctx"] == {
        "limit": 100_000,
        "found": 100_001,
        "setting": "ATTENTION_VIZ_MAX_BODY_BYTES",
    }


def test_heads_that_do_not_divide_the_width_say_both_numbers(client: TestClient) -> None:
    item = only_error(client.post("/api/attention", json={"tokens": TOKENS, "num_heads": 3}))
    assert item["type"] == "heads_indivisible"
    assert item["ctx"] == {"width": 4, "heads": 3}
    item = only_error(client.post("/api/train", json={"n_embd": 30, "n_head": 4}))
    assert (item["type"], item["ctx"]) == ("heads_indivisible", {"width": 30, "heads": 4})


def test_pydantic_rules_keep_their_bounds_in_ctx(client: TestClient) -> None:
    item = only_error(client.post("/api/attention", json={"tokens": TOKENS, "num_heads": 0}))
    assert (item["type"], item["ctx"]) == ("greater_than_equal", {"ge": 1})
    item = only_error(client.post("/api/train", json={"learning_rate": 5}))
    assert (item["loc"], item["type"], item["ctx"]) == (
        ["body", "learning_rate"],
        "less_than_equal",
        {"le": 1.0},
    )
    # The rejected value is never echoed, even where pydantic's ctx would hold it.
    response = client.post("/api/attention", json={"tokens": TOKENS, "scale": "x" * 500})
    assert response.status_code == 422 and "x" * 50 not in response.text


def test_empty_inputs_have_their_own_type(client: TestClient) -> None:
    item = only_error(client.post("/api/train", json={"text": "   "}))
    assert (item["loc"], item["type"]) == (["body", "text"], "empty_input")
    item = only_error(client.post("/api/model/attention", json={"text": " "}))
    assert (item["loc"], item["type"]) == (["body", "text"], "empty_input")


def test_an_unknown_model_names_itself_in_ctx(client: TestClient) -> None:
    item = only_error(client.post("/api/model/attention", json={"model": "nope", "text": "a"}), 404)
    assert (item["type"], item["ctx"]) == ("model_not_found", {"name": "nope"})


def test_openapi_documents_ctx(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "ctx" in spec["info"]["description"] and "limit_exceeded" in spec["info"]["description"]


def test_a_huge_number_over_a_limit_is_still_a_422(client: TestClient) -> None:
    item = only_error(client.get(f"/api/lessons/scaling?dims={2**64}&scores=1&scales=1"))
    assert item["type"] == "limit_exceeded"
    assert item["ctx"]["found"] == float(2**64) and item["ctx"]["limit"] == 4096
