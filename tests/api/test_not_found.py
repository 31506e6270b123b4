"""Unknown URLs: an HTML 404 page for browsers, the JSON error shape for API clients."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_browser_gets_an_html_404_with_the_navigation(client: TestClient) -> None:
    response = client.get("/no/such/page", headers={"accept": BROWSER_ACCEPT})
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    body = response.text
    assert "<h1>Page not found</h1>" in body
    assert '<nav aria-label="Pages">' in body
    for href in ('href="/"', 'href="/compare"', 'href="/lessons"', 'href="/model"', 'href="/docs"'):
        assert href in body
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_the_path_is_escaped_in_the_page(client: TestClient) -> None:
    response = client.get("/%3Cscript%3Ealert(1)%3C/script%3E", headers={"accept": "text/html"})
    assert response.status_code == 404
    assert "<script>alert(1)" not in response.text
    assert "&lt;script&gt;alert(1)" in response.text


@pytest.mark.parametrize(
    ("path", "accept"),
    [
        ("/no/such/page", "application/json"),
        ("/no/such/page", "*/*"),  # curl
        ("/no/such/page", None),
        ("/api/nothing", BROWSER_ACCEPT),  # the API answers JSON even to a browser
        ("/api/nothing", "*/*"),
    ],
)
def test_api_clients_keep_the_json_error(client: TestClient, path: str, accept: str | None) -> None:
    headers = {"accept": accept} if accept else {}
    response = client.get(path, headers=headers)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    message = f"nothing at {path}; see /docs for the API"
    assert response.json() == {"detail": [{"loc": ["path"], "msg": message, "type": "not_found"}]}


def test_other_errors_stay_json_for_browsers(client: TestClient) -> None:
    response = client.post("/", headers={"accept": BROWSER_ACCEPT})
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/json"
