"""Refuse requests that another web page makes a browser send: DNS rebinding and cross-site writes.

Two checks, before any route runs (pure ASGI, a few microseconds a request):

- **Host** (every request): the ``Host`` header must name this server.  A page on
  ``http://evil.example:8000`` whose DNS answer is switched to 127.0.0.1 (DNS
  rebinding) reaches a local server with ``Host: evil.example:8000``: refused, 400.
  Always allowed: the loopback names (``localhost``, ``*.localhost``, which browsers
  resolve themselves) and any IP address literal (``127.0.0.1``, ``[::1]``,
  ``10.0.0.7``: a literal cannot be rebound); besides them, the names in
  ``ATTENTION_VIZ_ALLOWED_HOSTS`` (comma-separated, ``*`` for any).  This does not
  depend on the bound address: in a container bound to 0.0.0.0,
  ``http://localhost:8000`` (a published port), the pod's IP (Kubernetes probes) and
  ``kubectl port-forward`` work with no setting; a DNS name (a Service, an Ingress
  host, a machine's name on the LAN) must be listed.
- **Origin** (POST, PUT, PATCH, DELETE): a browser's cross-origin form or ``fetch``
  POST is a CORS "simple request" that runs without a preflight.  Its ``Origin``
  must be this server's own (the same host and port as ``Host``) or one of
  ``ATTENTION_VIZ_ALLOWED_ORIGINS``; without an ``Origin``, a ``Sec-Fetch-Site:
  cross-site`` is refused too.  Clients that are not browsers (curl, scripts)
  send neither header and pass.  Refused: 403.

Both answers are the app's JSON error shape, naming the header and the setting.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = ("localhost",)
# Starlette's TestClient sends ``Host: testserver`` from the client ``testclient``, a
# name no socket has: allowed only for that in-process client.
TEST_CLIENT = "testclient"
TEST_SERVER = "testserver"


def split_names(value: str) -> tuple[str, ...]:
    """A comma-separated setting as lower-case entries, blanks dropped."""
    return tuple(part.strip().lower() for part in value.split(",") if part.strip())


DEFAULT_PORTS = {"http": 80, "https": 443}


def host_and_port(host: str) -> tuple[str, int | None]:
    """A ``Host`` header's name and port: ``[::1]:8000`` → (``[::1]``, 8000).

    Anything but ``name[:port]`` (userinfo, a path, spaces, a bad port) → ("", None).
    """
    if any(c in host for c in "@/?#\\ \t"):
        return "", None
    try:
        parts = urlsplit("//" + host.strip())
        name, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is not a number, an unclosed bracket
        return "", None
    return (f"[{name}]" if ":" in name else name), port


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    return True


def host_allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """Loopback names and IP literals (neither can be rebound), and the listed names."""
    if name in LOOPBACK_NAMES or name.endswith(".localhost") or is_ip_literal(name):
        return True
    return "*" in allowed or name in allowed


def same_origin(origin: str, host: str) -> bool:
    """``origin`` (``scheme://host[:port]``) names the host and port of the ``Host`` header.

    A port left out means the scheme's default on both sides; the scheme itself is
    not compared (behind a TLS-terminating proxy the server sees http while the
    page's origin is https).
    """
    try:
        parts = urlsplit(origin.strip())
        origin_port = parts.port
    except ValueError:
        return False
    default = DEFAULT_PORTS.get(parts.scheme)
    if default is None or not parts.hostname:
        return False
    name, port = host_and_port(host)
    origin_name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return origin_name == name and (origin_port or default) == (port or default)


class RequestGuardMiddleware:
    """400 for a ``Host`` that is not this server's, 403 for a cross-origin write."""

    def __init__(self, app: ASGIApp, allowed_hosts: str = "", allowed_origins: str = "") -> None:
        self.app = app
        self.allowed_hosts = split_names(allowed_hosts)
        self.allowed_origins = frozenset(o.rstrip("/") for o in split_names(allowed_origins))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name, _ = host_and_port(host)
        from_test_client = (scope.get("client") or ("",))[0] == TEST_CLIENT
        if not (
            host_allowed(name, self.allowed_hosts) or (from_test_client and name == TEST_SERVER)
        ):
            shown = host[:100] if host else "missing"
            await _refuse(
                send,
                400,
                "host",
                f"Host {shown!r} is not a name of this server; list it in "
                "ATTENTION_VIZ_ALLOWED_HOSTS (comma-separated; localhost and IP addresses "
                "always pass)",
                "host_not_allowed",
            )
            return
        if scope["method"] in STATE_CHANGING:
            origin = headers.get("origin")
            if origin is not None:
                if not (same_origin(origin, host) or origin.lower() in self.allowed_origins):
                    await _refuse(
                        send,
                        403,
                        "origin",
                        f"a page at {origin[:100]!r} may not send {scope['method']} requests "
                        "to this server; list its origin in ATTENTION_VIZ_ALLOWED_ORIGINS to "
                        "allow it",
                        "origin_not_allowed",
                    )
                    return
            elif headers.get("sec-fetch-site") == "cross-site":
                await _refuse(
                    send,
                    403,
                    "sec-fetch-site",
                    f"a page of another site may not send {scope['method']} requests to this "
                    "server (Sec-Fetch-Site: cross-site, no Origin)",
                    "origin_not_allowed",
                )
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, header: str, msg: str, kind: str) -> None:
    body = orjson.dumps({"detail": [{"loc": ["header", header], "msg": msg, "type": kind}]})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
