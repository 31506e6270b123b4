"""Issue 20 item 6: another web page cannot make a browser start training or read the API.

A cross-origin POST (a CORS "simple request": a form or a ``fetch`` without custom
headers, so no preflight) is refused with 403 before it reaches a route, and a
``Host`` that does not name the server (DNS rebinding) with 400; curl and scripts,
which send no ``Origin``, and the server's own pages still pass.  In-process
(TestClient) and over a real socket (uvicorn).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.request_guard import host_and_port, same_origin
from app.settings import Settings
from devtools.server import serving

TOY = {"tokens": ["stream", "bank", "mud"], "scale": "none"}
TRAIN = {"n_layer": 1, "n_embd": 16, "block_size": 16, "batch_size": 4, "max_steps": 1}


def only_error(response: httpx.Response) -> dict[str, object]:
    (error,) = response.json()["detail"]
    assert response.headers["content-type"] == "application/json"
    return error


def test_cross_origin_multipart_train_is_refused_before_it_starts(client: TestClient) -> None:
    response = client.post(
        "/api/train",
        headers={"origin": "http://evil.example"},
        files={"file": ("t.txt", b"the bank of the river " * 20, "text/plain")},
        data={"max_steps": "1"},
    )
    assert response.status_code == 403
    error = only_error(response)
    assert error["loc"] == ["header", "origin"] and error["type"] == "origin_not_allowed"
    assert "http://evil.example" in str(error["msg"])
    assert "ATTENTION_VIZ_ALLOWED_ORIGINS" in str(error["msg"])
    assert client.app.state.training_slots.busy == 0  # type: ignore[attr-defined]
    # The security headers are on the refusal too.
    assert response.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_every_state_changing_method_checks_the_origin(client: TestClient, method: str) -> None:
    response = client.request(method, "/api/attention", headers={"origin": "https://x.example"})
    assert response.status_code == 403
    assert only_error(response)["type"] == "origin_not_allowed"


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "null"},  # a sandboxed iframe or a file:// page
        {"origin": "http://testserver.evil.example"},
        {"origin": "http://testserver:8080"},  # same host, another port: another origin
        {"sec-fetch-site": "cross-site"},  # no Origin, but the browser says cross-site
    ],
)
def test_foreign_pages_are_refused(client: TestClient, headers: dict[str, str]) -> None:
    assert client.post("/api/attention", json=TOY, headers=headers).status_code == 403


@pytest.mark.parametrize(
    "headers",
    [
        {},  # curl, scripts
        {"origin": "http://testserver"},  # the server's own page
        {"sec-fetch-site": "same-origin"},
        {"sec-fetch-site": "none"},  # typed in the address bar
    ],
)
def test_own_pages_and_non_browsers_pass(client: TestClient, headers: dict[str, str]) -> None:
    response = client.post("/api/attention", json=TOY, headers=headers)
    assert response.status_code == 200, response.text


def test_reads_are_not_origin_checked(client: TestClient) -> None:
    # A cross-origin GET cannot be read by the other page (no CORS headers); the Host
    # check is what stops DNS rebinding.
    assert client.get("/api/presets", headers={"origin": "http://evil.example"}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example"])
def test_a_foreign_host_is_refused_on_every_method(client: TestClient, host: str) -> None:
    for response in (
        client.get("/api/presets", headers={"host": host}),
        client.get("/", headers={"host": host}),
        client.post("/api/attention", json=TOY, headers={"host": host}),
    ):
        assert response.status_code == 400
        error = only_error(response)
        assert error["loc"] == ["header", "host"] and error["type"] == "host_not_allowed"
        assert host in str(error["msg"]) and "ATTENTION_VIZ_ALLOWED_HOSTS" in str(error["msg"])
        assert response.headers["content-security-policy"].startswith("default-src 'self'")


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8000", "app.localhost:1", "127.0.0.1:8000", "[::1]:8000", "10.1.2.3"],
)
def test_loopback_names_and_ip_addresses_pass_by_default(client: TestClient, host: str) -> None:
    assert client.get("/healthz", headers={"host": host}).status_code == 200


def test_allowed_hosts_and_origins_are_settings() -> None:
    settings = Settings(allowed_hosts="viz.example, other.example", allowed_origins="https://a.io")
    with TestClient(create_app(settings), base_url="http://viz.example") as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/healthz", headers={"host": "other.example:81"}).status_code == 200
        # A list adds names: localhost and IP addresses still pass, others do not.
        assert client.get("/healthz", headers={"host": "localhost:1"}).status_code == 200
        assert client.get("/healthz", headers={"host": "10.0.0.7:8000"}).status_code == 200
        assert client.get("/healthz", headers={"host": "evil.example"}).status_code == 400
        ok = client.post("/api/attention", json=TOY, headers={"origin": "https://a.io"})
        assert ok.status_code == 200
        assert (
            client.post("/api/attention", json=TOY, headers={"origin": "https://b.io"}).status_code
            == 403
        )
    with TestClient(create_app(Settings(allowed_hosts="*")), base_url="http://any.example") as c:
        assert c.get("/healthz").status_code == 200


def test_host_and_origin_parsing() -> None:
    assert host_and_port("[::1]:8000") == ("[::1]", 8000)
    assert host_and_port("Example.COM") == ("example.com", None)
    for bad in ("evil@localhost", "localhost/x", "localhost:http", "[::1", "a b"):
        assert host_and_port(bad) == ("", None), bad
    assert same_origin("https://viz.example", "viz.example")  # TLS ended by a proxy
    assert same_origin("https://viz.example", "viz.example:443")
    assert same_origin("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert not same_origin("http://127.0.0.1:8001", "127.0.0.1:8000")
    assert not same_origin("http://viz.example", "viz.example:8000")
    assert not same_origin("null", "viz.example")
    assert not same_origin("ftp://viz.example", "viz.example")


# --- over a real socket -------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    runs = tmp_path_factory.mktemp("runs")
    with serving({"ATTENTION_VIZ_RUNS_DIR": str(runs)}) as url:
        yield url


def raw_request(url: str, request: bytes) -> bytes:
    """Send bytes as they are (httpx would set Host from the URL); the answer's bytes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_live_cross_origin_train_and_rebound_host_are_refused(live: str) -> None:
    with httpx.Client(base_url=live, timeout=30) as client:
        refused = client.post(
            "/api/train",
            data={"max_steps": "1"},
            files={"file": ("t.txt", b"the bank of the river " * 20, "text/plain")},
            headers={"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
        )
        assert refused.status_code == 403, refused.text
        assert only_error(refused)["type"] == "origin_not_allowed"
        own = client.post("/api/attention", json=TOY, headers={"origin": live})
        assert own.status_code == 200
        assert client.post("/api/attention", json=TOY).status_code == 200
    port = live.rsplit(":", 1)[1]
    rebound = raw_request(
        live,
        b"GET /api/models HTTP/1.1\r\nHost: evil.example:" + port.encode() + b"\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert rebound.startswith(b"HTTP/1.1 400 "), rebound[:200]
    assert b'"host_not_allowed"' in rebound and b"x-content-type-options: nosniff" in rebound
    local = raw_request(
        live,
        b"GET /healthz HTTP/1.1\r\nHost: localhost:" + port.encode() + b"\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert local.startswith(b"HTTP/1.1 200 "), local[:200]
