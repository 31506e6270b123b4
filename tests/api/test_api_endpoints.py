"""Compare, lessons, health probes, the offline docs page, OpenAPI and security headers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attention_core.presets import FINANCE, RIVER
from tests import reference_values as ref
from tests.printed import assert_printed

BANK_RAW = {
    "embedding": {"kind": "vocabulary"},
    "projection": {"kind": "identity"},
    "scale": "none",
}


def _cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_compare_river_vs_finance(client):
    body = {**BANK_RAW, "tokens_a": list(RIVER), "tokens_b": list(FINANCE)}
    response = client.post("/api/compare", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    (shared,) = result["shared"]
    assert shared["token"] == "bank"
    assert (shared["position_a"], shared["position_b"]) == (1, 1)
    assert shared["input_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert shared["input_distance"] == 0
    assert shared["output_cosine"] < 0.99
    assert shared["output_distance"] > 0.1
    river = client.post("/api/attention", json={**BANK_RAW, "tokens": list(RIVER)}).json()
    finance = client.post("/api/attention", json={**BANK_RAW, "tokens": list(FINANCE)}).json()
    assert result["a"] == river
    assert result["b"] == finance
    assert result["a"]["heads"][0]["context_vec"] == river["heads"][0]["context_vec"]
    a_bank, b_bank = result["a"]["output"][1], result["b"]["output"][1]
    assert shared["output_cosine"] == pytest.approx(_cosine(a_bank, b_bank), abs=1e-6)


def test_compare_with_no_shared_tokens(client):
    body = {**BANK_RAW, "tokens_a": ["stream", "mud"], "tokens_b": ["money", "loan"]}
    result = client.post("/api/compare", json=body).json()
    assert result["shared"] == []


def test_scaling_lesson_defaults(client):
    response = client.get("/api/lessons/scaling")
    assert response.status_code == 200
    lesson = response.json()
    assert lesson["trials"] == 1000 and lesson["seed"] == 0
    assert [r["dim"] for r in lesson["variance"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    for row in lesson["variance"]:
        # Var(q·k) ≈ d before scaling, ≈ 1 after (1,000 samples: within ~20 %).
        assert row["variance_unscaled"] == pytest.approx(row["dim"], rel=0.25)
        assert row["variance_scaled"] == pytest.approx(1.0, rel=0.25)
    assert lesson["scores"] == list(ref.SEED_001_SOFTMAX_SCORES)
    by_scale = {r["scale"]: r for r in lesson["sharpness"]}
    assert_printed(by_scale[1.0]["weights"], ref.SEED_001_SOFTMAX)
    assert_printed(by_scale[8.0]["weights"], ref.SEED_001_SOFTMAX_TIMES_8)
    maxima = [r["max_weight"] for r in lesson["sharpness"]]
    assert maxima == sorted(maxima)  # larger scale, sharper softmax


def test_scaling_lesson_query_params(client):
    params = [("dims", 3), ("dims", 300), ("trials", 50), ("seed", 7)]
    params += [("scores", 1.0), ("scores", 2.0), ("scales", 1.0), ("scales", 10.0)]
    lesson = client.get("/api/lessons/scaling", params=params).json()
    assert lesson["trials"] == 50 and lesson["seed"] == 7
    assert [r["dim"] for r in lesson["variance"]] == [3, 300]
    assert lesson["scores"] == [1.0, 2.0]
    assert [r["scale"] for r in lesson["sharpness"]] == [1.0, 10.0]
    again = client.get("/api/lessons/scaling", params=params).json()
    assert again == lesson  # seeded: the same figures every time
    other_seed = client.get("/api/lessons/scaling", params=[*params[:3], ("seed", 8)]).json()
    assert other_seed["variance"] != lesson["variance"]


@pytest.mark.parametrize(
    ("params", "loc", "needle"),
    [
        ({"dims": 5000}, ["query", "dims", 0], "MAX_LESSON_DIM"),
        ({"dims": 0}, ["query", "dims", 0], "at least 1"),
        ({"trials": 20001}, ["query", "trials"], "MAX_LESSON_TRIALS"),
        ({"trials": 1}, ["query", "trials"], "2"),
        ({"dims": 4096, "trials": 20000}, ["query", "trials"], "MAX_LESSON_SAMPLES"),
        ({"scores": "nan"}, ["query", "scores", 0], "1e6"),
        ({"scales": "inf"}, ["query", "scales", 0], "1e6"),
        ({"dims": list(range(1, 40))}, ["query", "dims"], "MAX_LESSON_DIMS"),
    ],
)
def test_scaling_lesson_limits(client, params, loc, needle):
    response = client.get("/api/lessons/scaling", params=params)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == loc
    assert needle in error["msg"]


def test_health_probes(client):
    healthz = client.get("/healthz")
    assert (healthz.status_code, healthz.text) == (200, "ok")
    readyz = client.get("/readyz")
    assert (readyz.status_code, readyz.text) == (200, "ready")


def test_docs_page_uses_only_same_origin_assets(client):
    response = client.get("/docs")
    assert response.status_code == 200
    html = response.text
    assert "swagger-ui" in html
    assert not re.search(r"https?://", html), "the docs page must not load from other origins"
    assert "<script>" not in html  # no inline scripts (the CSP forbids them)
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert len(assets) >= 4
    for path in assets:
        assert path.startswith("/"), path
        asset = client.get(path)
        assert asset.status_code == 200, path
        assert len(asset.content) > 0
    assert 'data-openapi-url="/openapi.json"' in html


def test_openapi_is_valid(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert spec["openapi"].startswith("3.")
    for path in ("/api/attention", "/api/compare", "/api/presets", "/api/presets/{name}"):
        assert path in spec["paths"]
    from openapi_spec_validator import validate

    validate(spec)


API_CALLS = [
    ("get", "/api/presets", None),
    ("post", "/api/attention", {**BANK_RAW, "tokens": list(RIVER)}),
    ("post", "/api/attention", {"tokens": []}),  # errors carry the headers too
    ("get", "/nowhere", None),
    ("get", "/docs", None),
    ("get", "/docs/init.js", None),
    ("get", "/openapi.json", None),
    ("get", "/vendor/plotly.min.js", None),
    ("get", "/healthz", None),
]


@pytest.mark.parametrize(("method", "path", "body"), API_CALLS)
def test_security_headers(client, method, path, body):
    response = client.request(method, path, json=body)
    headers = response.headers
    csp = headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in directives["script-src"]
    assert directives["frame-ancestors"] == "'none'"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"


def test_static_files_carry_security_headers(client):
    from app.paths import STATIC_DIR

    files = sorted(p for p in STATIC_DIR.rglob("*") if p.is_file())
    assert files, f"{STATIC_DIR} holds no file"
    response = client.get(f"/static/{files[0].relative_to(STATIC_DIR).as_posix()}")
    assert response.status_code == 200
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_plotly_is_served_gzipped_with_cache_control(client):
    response = client.get("/vendor/plotly.min.js", headers={"accept-encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert "max-age=" in response.headers["cache-control"]
    assert "accept-encoding" in response.headers["vary"].lower()
    assert response.headers["content-type"].startswith("text/javascript")
    # httpx decodes it: the body is the real plotly.min.js.
    assert b"plotly" in response.content[:2000].lower()
    compressed = int(response.headers["content-length"])
    assert compressed < len(response.content) / 3


def test_plotly_is_served_plain_without_gzip(client):
    response = client.get("/vendor/plotly.min.js", headers={"accept-encoding": "identity"})
    assert response.status_code == 200
    assert "content-encoding" not in response.headers
    assert int(response.headers["content-length"]) == len(response.content)
    assert b"plotly" in response.content[:2000].lower()


def test_own_static_files_are_revalidated_with_etag(client) -> None:
    first = client.get("/static/js/api.js")
    assert first.status_code == 200
    assert first.headers["cache-control"] == "no-cache"
    again = client.get("/static/js/api.js", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304


def test_own_static_files_under_their_versioned_url_are_immutable(client) -> None:
    import hashlib
    import re

    page = client.get("/").text
    url = re.search(r'"(/static/js/heatmap\.js\?v=([0-9a-f]{12}))"', page)
    assert url, "the import map names no versioned heatmap.js"
    response = client.get(url.group(1), headers={"accept-encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-encoding"] == "gzip"
    assert hashlib.sha256(response.content).hexdigest()[:12] == url.group(2)
    # An old version (or none) is answered with the current bytes, revalidated every time.
    stale = client.get("/static/js/heatmap.js?v=000000000000")
    assert stale.headers["cache-control"] == "no-cache"
    assert stale.content == response.content
    # The inline import map is allowed by its hash, and by nothing broader.
    importmap = re.search(r'<script type="importmap">(.*?)</script>', page).group(1)
    digest = hashlib.sha256(importmap.encode()).digest()
    import base64

    csp = client.get("/").headers["content-security-policy"]
    assert f"'sha256-{base64.b64encode(digest).decode()}'" in csp
