"""A client that stops reading cannot hold an answer in memory.

uvicorn hands a body to the socket's buffer at once and then waits for the client
to drain it; a client that never reads kept a 200 MB answer (and its stream's
frames) alive for as long as it kept the connection open.  Here each body is
sent in ``CHUNK_BYTES`` pieces, each within ``ATTENTION_VIZ_WRITE_TIMEOUT_SECONDS``:
past it the request ends (``SlowReader``, logged; the server closes the connection),
so the answer is freed and at most one piece stays in the socket's buffer.  A
streamed model answer's work stops with it (``app.work_stream``).
"""

from __future__ import annotations

import logging

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CHUNK_BYTES = 1 << 20
log = logging.getLogger(__name__)


class SlowReader(Exception):
    """The client read nothing of the answer within the write timeout."""


class WriteTimeoutMiddleware:
    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.timeout <= 0:
            await self.app(scope, receive, send)
            return

        async def timed(message: Message) -> None:
            try:
                with anyio.fail_after(self.timeout):
                    await send(message)
            except TimeoutError:
                raise SlowReader(
                    f"the client read nothing for {self.timeout:g} s "
                    "(ATTENTION_VIZ_WRITE_TIMEOUT_SECONDS): the answer is dropped"
                ) from None

        async def chunked(message: Message) -> None:
            body = message.get("body", b"")
            if message["type"] != "http.response.body" or len(body) <= CHUNK_BYTES:
                await timed(message)
                return
            more = message.get("more_body", False)
            view = memoryview(body)
            for start in range(0, len(body), CHUNK_BYTES):
                last = start + CHUNK_BYTES >= len(body)
                piece = bytes(view[start : start + CHUNK_BYTES])
                await timed({"type": message["type"], "body": piece, "more_body": more or not last})

        try:
            await self.app(scope, receive, chunked)
        except SlowReader as exc:  # nothing more to send: the server closes the connection
            log.info("%s %s: %s", scope.get("method"), scope.get("path"), exc)
