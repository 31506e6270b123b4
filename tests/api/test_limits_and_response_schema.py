"""GET /api/limits is what the server enforces, and responses to legal extreme inputs
validate against the published OpenAPI schema (issue 14: HeadTrace declared every
number ≤ 1e6 while scores of legal inputs reach 2e6 and far beyond)."""

from __future__ import annotations

import json
import math
import re

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from app.main import create_app
from app.settings import Settings

MAX = 1_000_000.0


@pytest.fixture(scope="module")
def openapi(client: TestClient) -> dict:
    return client.get("/openapi.json").json()


def validator(openapi: dict, path: str) -> Draft202012Validator:
    """The published schema of ``POST path``'s 200 answer, with its $refs resolved in place."""
    ref = openapi["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
    # OpenAPI 3.1 schemas are JSON Schema 2020-12; the document itself is the root for $ref.
    return Draft202012Validator({**openapi, **ref["schema"]})


def assert_conforms(openapi: dict, path: str, body: dict) -> None:
    errors = sorted(validator(openapi, path).iter_errors(body), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)[:6]}: {e.message[:120]}" for e in errors[:5])


def largest(values: object) -> float:
    if isinstance(values, list):
        return max((largest(v) for v in values), default=0.0)
    return abs(values) if isinstance(values, int | float) else 0.0


def test_limits_are_the_settings(client: TestClient) -> None:
    limits = client.get("/api/limits").json()
    assert limits == {
        "max_tokens": 64,
        "max_token_chars": 64,
        "max_dim": 256,
        "max_heads": 16,
        "max_vocabulary_words": 256,
        "max_abs_value": MAX,
        "max_body_bytes": 2_000_000,
        "max_lesson_dims": 32,
        "max_lesson_dim": 4096,
        "max_lesson_trials": 20_000,
        "max_lesson_samples": 4_000_000,
        "max_lesson_scores": 64,
        "model_max_tokens": None,  # per model: the device's memory and its context
        "model_full_maps_bytes": 192 * 2**20,
        "model_max_answer_cells": 32 * 2**20,
    }


def test_limits_follow_the_environment_and_reach_the_pages() -> None:
    settings = Settings(max_tokens=8, max_lesson_samples=10_000, max_dim=32)
    with TestClient(create_app(settings)) as small:
        limits = small.get("/api/limits").json()
        assert (limits["max_tokens"], limits["max_lesson_samples"], limits["max_dim"]) == (
            8,
            10_000,
            32,
        )
        for path in ("/", "/compare", "/lessons"):
            html = small.get(path).text
            block = re.search(r'id="initial-data">(.*?)</script>', html, re.S)
            assert block is not None
            assert json.loads(block.group(1))["limits"] == limits, path
        # The published token limit is the enforced one: 8 pass, 9 are refused.
        ok = small.post("/api/attention", json={"tokens": ["bank"] * 8})
        assert ok.status_code == 200
        refused = small.post("/api/attention", json={"tokens": ["bank"] * 9})
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["body", "tokens"]


def test_lesson_budget_published_is_the_one_enforced(client: TestClient) -> None:
    """The lessons page's largest request (d_k up to 1024) with trials adapted to the budget."""
    limits = client.get("/api/limits").json()
    dims = [2**i for i in range(11)]  # 1 … 1024: sum 2047
    trials = min(2000, limits["max_lesson_trials"], limits["max_lesson_samples"] // sum(dims))
    assert trials == 1954  # 2000 × 2047 would be 4,094,000 > 4,000,000: the old page's 422

    def query(n: int) -> str:
        return "&".join(f"dims={d}" for d in dims) + f"&trials={n}&seed=0&scores=0&scales=1"

    ok = client.get(f"/api/lessons/scaling?{query(trials)}")
    assert ok.status_code == 200, ok.text
    assert ok.json()["variance"][-1]["dim"] == 1024
    over = client.get(f"/api/lessons/scaling?{query(trials + 1)}")
    assert over.status_code == 422
    assert over.json()["detail"][0]["loc"] == ["query", "trials"]
    scores = "&".join("scores=1" for _ in range(limits["max_lesson_scores"] + 1))
    too_many = client.get(f"/api/lessons/scaling?dims=1&trials=2&{scores}&scales=1")
    assert too_many.status_code == 422


EXTREMES = {
    # The case: explicit vectors of 1000s; q·k = 4 × 1000² = 4e6.
    "vectors of 1000s": {
        "tokens": ["a", "b", "c"],
        "embedding": {"kind": "explicit", "vectors": [[1000.0] * 4, [-1000.0] * 4, [1000.0] * 4]},
        "scale": "none",
    },
    # 64 tokens × 256 numbers of ±1e6, scores × 1e6: ~2.6e20 after scaling.
    "widest inputs, largest scale": {
        "tokens": [f"t{i}" for i in range(64)],
        "embedding": {
            "kind": "explicit",
            "vectors": [[MAX if (i + j) % 3 else -MAX for j in range(256)] for i in range(64)],
        },
        "scale": MAX,
        "causal": True,
        "num_heads": 16,
    },
    # Explicit W and W_out of 1e6: scores ~2.6e29, output ~4e21, still finite in float32.
    "largest matrices": {
        "tokens": [f"w{i}" for i in range(8)],
        "embedding": {"kind": "explicit", "vectors": [[MAX] * 64 for _ in range(8)]},
        "projection": {
            "kind": "explicit",
            "W_query": [[MAX] * 64 for _ in range(64)],
            "W_key": [[-MAX] * 64 for _ in range(64)],
            "W_value": [[MAX] * 64 for _ in range(64)],
            "W_out": [[MAX] * 64 for _ in range(64)],
        },
        "num_heads": 4,
    },
    "cross-attention, hashed": {
        "tokens": ["bank", "loan"],
        "source_tokens": ["stream", "bank", "mud"],
        "embedding": {"kind": "hashed", "dim": 256, "seed": 7},
        "projection": {"kind": "seeded_rand", "d_out": 256, "seed": 1},
        "scale": MAX,
    },
}


@pytest.mark.parametrize("name", list(EXTREMES))
def test_extreme_legal_answers_match_the_published_schema(
    client: TestClient, openapi: dict, name: str
) -> None:
    response = client.post("/api/attention", json=EXTREMES[name])
    assert response.status_code == 200, response.text
    trace = response.json()
    assert_conforms(openapi, "/api/attention", trace)
    head = trace["heads"][0]
    # What the old schema (every number ≤ 1e6) rejected: scores well beyond 1e6.
    assert max(largest(head["attn_scores"]), largest(head["scaled_scores"])) > 2e6
    # The bounds it still declares are kept: inputs within ±1e6, weights within [0, 1].
    assert largest(trace["x"]) <= MAX
    weights = [w for h in trace["heads"] for row in h["attn_weights"] for w in row]
    assert min(weights) >= 0 and max(weights) <= 1
    assert all(math.isfinite(v) for v in weights)


def test_extreme_comparison_matches_the_published_schema(client: TestClient, openapi: dict) -> None:
    vectors = {"big": [MAX] * 4, "small": [-MAX] * 4, "mid": [MAX, -MAX] * 2}
    body = {
        "tokens_a": ["big", "small", "mid"],
        "tokens_b": ["mid", "big"],
        "embedding": {"kind": "vocabulary", "extra": vectors},
        "projection": {"kind": "seeded_linear", "d_out": 16, "seed": 3},
        "scale": "none",
    }
    response = client.post("/api/compare", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert_conforms(openapi, "/api/compare", result)
    assert largest(result["a"]["heads"][0]["attn_scores"]) > 1e6


def test_the_schema_check_is_not_vacuous(client: TestClient, openapi: dict) -> None:
    """The validator does reject what the schema forbids (a weight of 1.5, a huge input)."""
    trace = client.post("/api/attention", json=EXTREMES["vectors of 1000s"]).json()
    bad_weight = json.loads(json.dumps(trace))
    bad_weight["heads"][0]["attn_weights"][0][0] = 1.5
    assert list(validator(openapi, "/api/attention").iter_errors(bad_weight))
    bad_input = json.loads(json.dumps(trace))
    bad_input["x"][0][0] = 2 * MAX
    assert list(validator(openapi, "/api/attention").iter_errors(bad_input))
