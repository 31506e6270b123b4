"""The Plotly.js the pages load: the vendored partial bundle, pinned by hash, served
immutable under a versioned name; the plotly package's full bundle when it is missing."""

from __future__ import annotations

import hashlib
import re

import pytest
from fastapi.testclient import TestClient

from app import plotly_bundle
from app.main import create_app
from app.paths import PLOTLY_PACKAGE_JS


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def page_plotly_src(client: TestClient) -> str:
    match = re.search(r'data-plotly-src="([^"]+)"', client.get("/").text)
    assert match, "the page names no Plotly URL"
    return match.group(1)


def test_vendored_file_matches_its_pin() -> None:
    data = plotly_bundle.PARTIAL_PATH.read_bytes()
    assert sha256(data) == plotly_bundle.PARTIAL_SHA256
    header = plotly_bundle.VERSION_HEADER.search(data[:512])
    assert header and header.group(1).decode() == plotly_bundle.PARTIAL_VERSION


def test_partial_bundle_is_the_plotly_packages_version() -> None:
    """Same Plotly.js either way: the pin follows the plotly Python package."""
    assert plotly_bundle.package_bundle_version() == plotly_bundle.PARTIAL_VERSION


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_served_bytes_match_the_pinned_hash(client: TestClient, encoding: str) -> None:
    src = page_plotly_src(client)
    assert src == f"/vendor/plotly-cartesian-{plotly_bundle.PARTIAL_VERSION}.min.js"
    response = client.get(src, headers={"accept-encoding": encoding})
    assert response.status_code == 200
    assert sha256(response.content) == plotly_bundle.PARTIAL_SHA256
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-type"].startswith("text/javascript")
    if encoding == "gzip":
        assert response.headers["content-encoding"] == "gzip"
        assert int(response.headers["content-length"]) < len(response.content) / 2.5


def test_only_the_current_versioned_name_is_served(client: TestClient) -> None:
    response = client.get("/vendor/plotly-cartesian-0.0.1.min.js")
    assert response.status_code == 404
    assert response.json()["detail"][0]["type"] == "not_found"


def test_stable_name_serves_the_same_bytes_for_a_day(client: TestClient) -> None:
    response = client.get("/vendor/plotly.min.js")
    assert sha256(response.content) == plotly_bundle.PARTIAL_SHA256
    assert response.headers["cache-control"] == "public, max-age=86400"


def test_missing_vendored_file_falls_back_to_the_full_bundle(tmp_path, monkeypatch) -> None:
    chosen = plotly_bundle.choose(partial=tmp_path / "absent.min.js")
    assert chosen.path == PLOTLY_PACKAGE_JS and not chosen.partial
    version = plotly_bundle.package_bundle_version()
    assert chosen.name == f"plotly-{version}.min.js"
    plotly_bundle.current.cache_clear()
    monkeypatch.setattr(plotly_bundle, "PARTIAL_PATH", tmp_path / "absent.min.js")
    try:
        with TestClient(create_app()) as client:
            src = page_plotly_src(client)
            assert src == f"/vendor/plotly-{version}.min.js"
            response = client.get(src)
            assert response.status_code == 200
            assert sha256(response.content) == sha256(PLOTLY_PACKAGE_JS.read_bytes())
            assert "immutable" in response.headers["cache-control"]
            vendored = client.get(f"/vendor/{plotly_bundle.PARTIAL_NAME}")
            assert vendored.status_code == 404
    finally:
        plotly_bundle.current.cache_clear()
