"""Issue 20 item 7: directory and invalid static paths are 404, not 500, and every response,
errors included (an unhandled exception's 500 too), carries the security headers."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.security import security_headers
from app.settings import Settings

HEADERS = {name.decode(): value.decode() for name, value in security_headers()}


def assert_secured(response: httpx.Response) -> None:
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code)


@pytest.mark.parametrize(
    "path",
    [
        "/static/",
        "/static/js/",
        "/static/js",
        "/static/js/%00.js",
        "/static/%00",
        "/static/js/" + "a" * 300 + ".js",  # longer than a file name may be
        "/static/js/nope.js",
        "/static/../app/main.py",
    ],
)
def test_directories_and_invalid_names_are_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404, response.text
    (error,) = response.json()["detail"]
    assert error["type"] == "not_found"
    assert_secured(response)
    assert client.head(path).status_code == 404


def test_a_real_file_is_still_served(client: TestClient) -> None:
    response = client.get("/static/js/explorer.js")
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/javascript"
    )
    assert_secured(response)


def test_an_unhandled_exception_answers_json_500_with_the_headers() -> None:
    app = create_app()

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    (error,) = response.json()["detail"]
    assert error["type"] == "internal_error" and "a bug" not in error["msg"]
    assert_secured(response)


def test_every_error_status_carries_the_headers(client: TestClient) -> None:
    small = TestClient(create_app(Settings(max_body_bytes=1024)))
    answers = {
        400: client.post(
            "/api/attention", content=b"\xff", headers={"content-type": "application/json"}
        ),
        403: client.post("/api/attention", json={}, headers={"origin": "http://evil.example"}),
        404: client.get("/api/nope"),
        405: client.get("/api/attention"),
        413: small.post("/api/attention", content=b"x" * 2048),
        415: client.post("/api/train", content=b"x", headers={"content-type": "text/plain"}),
        422: client.post("/api/attention", json={"tokens": []}),
    }
    html_404 = client.get("/nope", headers={"accept": "text/html"})
    for status, response in [*answers.items(), (404, html_404)]:
        assert response.status_code == status, (status, response.text[:200])
        assert_secured(response)
