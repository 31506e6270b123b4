"""The API over a real socket: a uvicorn process started by the ``live_server`` fixture."""

from __future__ import annotations

import httpx
import pytest

from attention_core.presets import FINANCE, RIVER
from tests import reference_values as ref
from tests.printed import assert_printed

BANK_RAW = {"tokens": list(RIVER), "embedding": {"kind": "vocabulary"}, "scale": "none"}
LIMIT = 2_000_000  # the default ATTENTION_VIZ_MAX_BODY_BYTES


@pytest.fixture(scope="module")
def http(live_server):
    with httpx.Client(base_url=live_server, timeout=30) as client:
        yield client


def test_flagship_over_http(http):
    response = http.post("/api/attention", json=BANK_RAW)
    assert response.status_code == 200
    assert_printed(response.json()["output"], ref.SEED_004_OUTPUTS["bank-raw"][0])
    assert response.headers["x-content-type-options"] == "nosniff"


def test_compare_over_http(http):
    body = {**BANK_RAW, "tokens_a": list(RIVER), "tokens_b": list(FINANCE)}
    del body["tokens"]
    (shared,) = http.post("/api/compare", json=body).json()["shared"]
    assert shared["token"] == "bank" and shared["output_cosine"] < 0.99


def test_presets_and_probes_over_http(http):
    assert len(http.get("/api/presets").json()) >= 10
    assert http.get("/healthz").text == "ok"
    assert http.get("/readyz").text == "ready"


def test_streamed_body_over_the_limit_is_cut_off(http):
    sent = 0

    def chunks():
        nonlocal sent
        yield b'{"tokens":["'
        for _ in range(40):  # 40 × 64 KiB = 2.6 MB, sent without a Content-Length
            sent += 65536
            yield b"a" * 65536
        yield b'"]}'

    response = http.post(
        "/api/attention", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413, response.text
    assert response.request.headers.get("transfer-encoding") == "chunked"
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body"] and error["type"] == "body_too_large"
    assert f"more than {LIMIT}" in error["msg"] and "ATTENTION_VIZ_MAX_BODY_BYTES" in error["msg"]


def test_streamed_body_under_the_limit_is_accepted(http):
    def chunks():
        yield b'{"tokens":["stream",'
        yield b'"bank","mud"],"scale":"none"}'

    response = http.post(
        "/api/attention", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["tokens"] == list(RIVER)


def test_declared_content_length_over_the_limit(http):
    body = b'{"tokens":["' + b"a" * LIMIT + b'"]}'
    response = http.post(
        "/api/attention", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert str(len(body)) in response.json()["detail"][0]["msg"]


def test_server_still_answers_after_rejections(http):
    assert http.post("/api/attention", json=BANK_RAW).status_code == 200


def test_plotly_gzip_over_http(http):
    response = http.get("/vendor/plotly.min.js", headers={"accept-encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert "max-age" in response.headers["cache-control"]
    assert int(response.headers["content-length"]) < len(response.content) / 3
