"""ASGI middleware: security headers on every response, and a request-body size cap.

Pure ASGI (not BaseHTTPMiddleware) so each costs a few microseconds a request.
"""

from __future__ import annotations

import orjson
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .static_files import import_map_csp_source


def content_security_policy(script_sources: tuple[str, ...] = ()) -> str:
    """The CSP; ``script_sources`` are hashes of inline scripts allowed (the import map)."""
    return "; ".join(
        [
            "default-src 'self'",
            " ".join(["script-src 'self'", *script_sources]),
            # Plotly sets inline style attributes and injects a <style> element.
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "font-src 'self'",
            "object-src 'none'",
            "base-uri 'self'",
            "frame-ancestors 'none'",
            "form-action 'self'",
        ]
    )


def security_headers() -> list[tuple[bytes, bytes]]:
    csp = content_security_policy((import_map_csp_source(),))
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
        (b"cross-origin-opener-policy", b"same-origin"),
    ]


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = security_headers()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = self.headers

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class SecuredFastAPI(FastAPI):
    """FastAPI whose every response, an unhandled exception's 500 included, has the headers.

    Starlette puts its ``ServerErrorMiddleware`` (which answers 500) outside every
    middleware added with ``add_middleware``, so the headers are put on the
    outside of the whole stack instead.
    """

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeadersMiddleware(super().build_middleware_stack())


class BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Answer 413 when a body exceeds ``max_bytes``, by header or by counting a stream.

    A declared Content-Length over the limit is refused before reading a byte;
    a chunked body is counted as it arrives and cut off at the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Send, size: str) -> None:
        msg = (
            f"the request body is {size} bytes; the limit is {self.max_bytes} bytes "
            "(ATTENTION_VIZ_MAX_BODY_BYTES)"
        )
        # found: the declared size, or (cut off while counting) the least it was.
        found = int(size) if size.isdigit() else self.max_bytes + 1
        ctx = {"limit": self.max_bytes, "found": found, "setting": "ATTENTION_VIZ_MAX_BODY_BYTES"}
        item = {"loc": ["body"], "msg": msg, "type": "body_too_large", "ctx": ctx}
        body = orjson.dumps({"detail": [item]})
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit():
                    await self._reject(send, "an unreadable number of")
                    return
                if int(value) > self.max_bytes:
                    await self._reject(send, value.decode())
                    return
        received = 0
        started = False
        too_large = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if too_large:
                # The app may catch BodyTooLarge while parsing (FastAPI turns any
                # body error into a 400): answer 413 instead of its response.
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._reject(send, f"more than {self.max_bytes}")
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                started = True
                await self._reject(send, f"more than {self.max_bytes}")
