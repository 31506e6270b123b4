"""Each bad input gets its 4xx and a message naming the field and the limit.

Every error body has one shape: ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings, get_settings

VOCABULARY = ["bank", "loan", "money", "mud", "stream"]


def errors_of(response, status: int) -> list[dict]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail"} and body["detail"]
    for error in body["detail"]:
        assert {"loc", "msg", "type"} <= set(error) <= {"loc", "msg", "type", "ctx"}
        assert isinstance(error["msg"], str) and error["msg"]
        assert_limit_contract(error)
    return body["detail"]


def assert_limit_contract(error: dict) -> None:
    """A size over a limit says so in fields, not only in its sentence."""
    if "the limit is" in error["msg"] or "reads at most" in error["msg"]:
        assert error["type"] in ("limit_exceeded", "body_too_large"), error
        ctx = error["ctx"]
        assert {"limit", "found", "setting"} <= set(ctx), error
        assert isinstance(ctx["limit"], int) and isinstance(ctx["found"], int)
        assert ctx["found"] > ctx["limit"], error
        assert str(ctx["limit"]) in error["msg"].replace(",", ""), error
        assert (
            ctx["setting"] == "model_context"
            or ctx["setting"] in error["msg"]
            or (ctx["setting"].startswith("ATTENTION_VIZ_"))
        ), error


def error_of(response, status: int) -> dict:
    (error,) = errors_of(response, status)
    return error


def post_raw(client, path: str, content: bytes):
    return client.post(path, content=content, headers={"content-type": "application/json"})


# (body, loc, words the message must contain)
BAD_BODIES = {
    "empty tokens": ({"tokens": []}, ["body", "tokens"], ["empty"]),
    "65 tokens": ({"tokens": ["bank"] * 65}, ["body", "tokens"], ["65", "64", "MAX_TOKENS"]),
    "10,000 tokens": (
        {"tokens": ["bank"] * 10_000},
        ["body", "tokens"],
        ["10000", "64", "ATTENTION_VIZ_MAX_TOKENS"],
    ),
    "too-long token": (
        {"tokens": ["bank", "x" * 65]},
        ["body", "tokens", 1],
        ["65", "64", "MAX_TOKEN_CHARS"],
    ),
    "empty token": ({"tokens": [""]}, ["body", "tokens", 0], ["at least 1 character"]),
    "embedding dim": (
        {"tokens": ["a"], "embedding": {"kind": "hashed", "dim": 257}},
        ["body", "embedding", "dim"],
        ["257", "256", "MAX_DIM"],
    ),
    "seeded embedding dim": (
        {"tokens": ["a"], "embedding": {"kind": "seeded_random", "dim": 1000}},
        ["body", "embedding", "dim"],
        ["1000", "256", "MAX_DIM"],
    ),
    "d_out": (
        {"tokens": ["bank"], "projection": {"kind": "seeded_linear", "d_out": 257}},
        ["body", "projection", "d_out"],
        ["257", "256", "MAX_DIM"],
    ),
    "vector width": (
        {"tokens": ["bank"], "embedding": {"kind": "explicit", "vectors": [[1.0] * 257]}},
        ["body", "embedding", "vectors"],
        ["257", "256", "MAX_DIM"],
    ),
    "matrix width": (
        {
            "tokens": ["bank"],
            "projection": {
                "kind": "explicit",
                "W_query": [[1.0] * 300] * 4,
                "W_key": [[1.0] * 2] * 4,
                "W_value": [[1.0] * 2] * 4,
            },
        },
        ["body", "projection", "W_query"],
        ["300", "256", "MAX_DIM"],
    ),
    "too many heads": (
        {"tokens": ["bank"], "num_heads": 17},
        ["body", "num_heads"],
        ["17", "16", "MAX_HEADS"],
    ),
    "heads not dividing width": (
        {"tokens": ["bank"], "num_heads": 3},
        ["body", "num_heads"],
        ["4", "3", "multiple"],
    ),
    "value beyond 1e6": (
        {"tokens": ["bank"], "embedding": {"kind": "explicit", "vectors": [[2e6, 1, 1, 1]]}},
        ["body", "embedding", "explicit", "vectors", 0, 0],
        ["1000000"],
    ),
    "value below -1e6": (
        {"tokens": ["bank"], "embedding": {"kind": "vocabulary", "extra": {"bank": [-1e7, 0]}}},
        ["body", "embedding", "vocabulary", "extra", "bank", 0],
        ["-1000000"],
    ),
    "ragged vectors": (
        {"tokens": ["a", "b"], "embedding": {"kind": "explicit", "vectors": [[1, 2], [1]]}},
        ["body", "embedding", "vectors"],
        ["ragged", "[1, 2]"],
    ),
    "vector count": (
        {"tokens": ["a", "b"], "embedding": {"kind": "explicit", "vectors": [[1.0, 2.0]]}},
        ["body", "embedding", "vectors"],
        ["1 vectors", "2 tokens"],
    ),
    "unknown words": (
        {"tokens": ["bank", "zebra", "yak"]},
        ["body", "tokens"],
        ["'zebra'", "'yak'", *VOCABULARY],
    ),
    "unknown source words": (
        {"tokens": ["bank"], "source_tokens": ["okapi"]},
        ["body", "source_tokens"],
        ["'okapi'", *VOCABULARY],
    ),
    "unknown field": ({"tokens": ["bank"], "colour": "red"}, ["body", "colour"], ["Extra"]),
    "unknown nested field": (
        {"tokens": ["bank"], "projection": {"kind": "identity", "d_out": 3}},
        ["body", "projection", "identity", "d_out"],
        ["Extra"],
    ),
    "unknown embedding kind": (
        {"tokens": ["bank"], "embedding": {"kind": "glove"}},
        ["body", "embedding"],
        ["vocabulary", "explicit"],
    ),
    "zero scale": ({"tokens": ["bank"], "scale": 0}, ["body", "scale"], ["greater than 0"]),
    "missing tokens": ({}, ["body", "tokens"], ["required"]),
    "causal as a number": ({"tokens": ["bank"], "causal": 0}, ["body", "causal"], ["boolean"]),
    "num_heads as a string": ({"tokens": ["bank"], "num_heads": "1"}, ["body", "num_heads"], []),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_bad_attention_body(client, case):
    body, loc, words = BAD_BODIES[case]
    errors = errors_of(client.post("/api/attention", json=body), 422)
    # Union types (scale) report one error per alternative; one must name the problem.
    matching = [e for e in errors if e["loc"][: len(loc)] == loc]
    assert matching, f"no error at {loc}: {errors}"
    assert any(all(w in e["msg"] for w in words) for e in matching), (words, matching)


def test_unknown_words_carry_where_and_how_many_in_ctx(client):
    error = error_of(client.post("/api/attention", json={"tokens": ["bank", "zebra", "yak"]}), 422)
    assert error["type"] == "spec_error"
    assert error["ctx"] == {"index": 1, "found": 2, "vocabulary_size": len(VOCABULARY)}


def test_compare_limits_name_the_field(client):
    body = {"tokens_a": ["bank"], "tokens_b": ["bank"] * 65}
    error = error_of(client.post("/api/compare", json=body), 422)
    assert error["loc"] == ["body", "tokens_b"]
    assert "MAX_TOKENS" in error["msg"]
    error = error_of(
        client.post("/api/compare", json={"tokens_a": ["bank"], "tokens_b": ["x"]}), 422
    )
    assert "'x'" in error["msg"] and "stream" in error["msg"]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_literals(client, literal):
    raw = b'{"tokens":["bank"],"embedding":{"kind":"explicit","vectors":[[%s,1,1,1]]}}' % literal
    error = error_of(post_raw(client, "/api/attention", raw), 422)
    assert error["loc"] == ["body", "embedding", "explicit", "vectors", 0, 0]
    assert "finite" in error["msg"] and "1e6" in error["msg"]


def test_nan_scale_literal(client):
    errors = errors_of(post_raw(client, "/api/attention", b'{"tokens":["bank"],"scale":NaN}'), 422)
    assert all(e["loc"][:2] == ["body", "scale"] for e in errors)
    assert any("finite" in e["msg"] for e in errors)


def test_malformed_json(client):
    error = error_of(post_raw(client, "/api/attention", b'{"tokens": ["bank"'), 422)
    assert error["loc"][0] == "body"
    assert "not valid JSON" in error["msg"]


def test_non_utf8_body(client):
    error = error_of(post_raw(client, "/api/attention", b'{"tokens":["\xff\xfe"]}'), 400)
    assert error["loc"] == ["body"] and "UTF-8" in error["msg"]


def test_deeply_nested_json(client):
    error = error_of(post_raw(client, "/api/attention", b"[" * 100_000), 400)
    assert error["loc"] == ["body"] and "nested" in error["msg"]


def test_body_over_the_limit_by_content_length(client):
    body = b'{"tokens":["' + b"a" * 2_000_000 + b'"]}'
    error = error_of(post_raw(client, "/api/attention", body), 413)
    assert error["loc"] == ["body"]
    assert "2000000" in error["msg"] and "ATTENTION_VIZ_MAX_BODY_BYTES" in error["msg"]


def test_body_over_a_lowered_limit():
    with TestClient(create_app(Settings(max_body_bytes=1024))) as small:
        error = error_of(post_raw(small, "/api/attention", b" " * 1025), 413)
        assert "1024" in error["msg"]
        ok = small.post("/api/attention", json={"tokens": ["bank"]})
        assert ok.status_code == 200


def test_unknown_preset(client):
    error = error_of(client.get("/api/presets/no-such-thing"), 404)
    assert error["loc"] == ["path", "name"]
    assert "'no-such-thing'" in error["msg"] and "bank-raw" in error["msg"]


def test_unknown_path(client):
    error = error_of(client.get("/api/nothing-here"), 404)
    assert "/api/nothing-here" in error["msg"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/attention"),
        ("put", "/api/compare"),
        ("post", "/api/presets"),
        ("delete", "/healthz"),
    ],
)
def test_wrong_method(client, method, path):
    response = client.request(method, path)
    error = error_of(response, 405)
    assert error["type"] == "method_not_allowed"
    assert "allow" in response.headers


def test_settings_override_max_tokens():
    with TestClient(create_app(Settings(max_tokens=3))) as small:
        ok = small.post("/api/attention", json={"tokens": ["stream", "bank", "mud"]})
        assert ok.status_code == 200
        too_many = small.post("/api/attention", json={"tokens": ["stream", "bank", "mud", "bank"]})
        error = error_of(too_many, 422)
        assert error["loc"] == ["body", "tokens"]
        assert "4" in error["msg"] and "3" in error["msg"]
        assert "ATTENTION_VIZ_MAX_TOKENS" in error["msg"]


def test_env_var_override_via_get_settings(monkeypatch):
    with monkeypatch.context() as env:
        env.setenv("ATTENTION_VIZ_MAX_HEADS", "2")
        get_settings.cache_clear()
        try:
            with TestClient(create_app()) as env_client:
                body = {"tokens": ["bank"], "num_heads": 4}
                error = error_of(env_client.post("/api/attention", json=body), 422)
                assert "the limit is 2 (ATTENTION_VIZ_MAX_HEADS)" in error["msg"]
        finally:
            get_settings.cache_clear()
    assert get_settings().max_heads == 16


def test_env_var_override_in_a_fresh_process():
    code = (
        "from fastapi.testclient import TestClient\n"
        "from app.main import create_app\n"
        "r = TestClient(create_app()).post('/api/attention', json={'tokens': ['bank'] * 3})\n"
        "print(r.status_code, r.json()['detail'][0]['msg'])\n"
    )
    env = {"ATTENTION_VIZ_MAX_TOKENS": "2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.startswith("422 ")
    assert "the limit is 2 (ATTENTION_VIZ_MAX_TOKENS)" in out


@pytest.mark.parametrize("token", ["a\x00b", "line\nbreak", "\x1b[31mred"])
def test_control_characters_in_tokens_are_refused(client, token: str) -> None:
    response = client.post(
        "/api/attention", json={"tokens": ["bank", token], "embedding": {"kind": "hashed"}}
    )
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "tokens", 1]
    assert "control character" in error["msg"]


def test_control_characters_in_added_words_are_refused(client) -> None:
    body = {
        "tokens": ["bank"],
        "embedding": {"kind": "vocabulary", "extra": {"x\ty": [1, 2, 3, 4]}},
    }
    response = client.post("/api/attention", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "embedding", "extra", "x\ty"]


def test_markup_tokens_are_accepted_and_returned_verbatim(client) -> None:
    tokens = ["<img src=x onerror=alert(1)>", "<b>x</b>", "a&amp;b"]
    response = client.post(
        "/api/attention", json={"tokens": tokens, "embedding": {"kind": "hashed"}}
    )
    assert response.status_code == 200
    assert response.json()["tokens"] == tokens
