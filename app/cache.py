"""A bounded LRU cache of successful POST answers, keyed by the exact request body.

The toy endpoints are pure functions of their body (seeded randomness
included), and the pages send the same preset bodies over and over, so a
repeat is answered from memory without parsing, validating or computing.
Only 200 answers are kept; errors always go through the app.  The cache is
per process and invisible to clients: any replica gives the same bytes.
"""

from __future__ import annotations

from collections import OrderedDict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# An ASGI response's raw headers: (name, value) byte pairs, as sent in http.response.start.
RawHeaders = list[tuple[bytes, bytes]]


class ResponseCache:
    """LRU of (path, body) → (headers, response body), bounded in entries and bytes."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.size = 0
        self._items: OrderedDict[tuple[str, bytes], tuple[RawHeaders, bytes]] = OrderedDict()

    def get(self, key: tuple[str, bytes]) -> tuple[RawHeaders, bytes] | None:
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def put(self, key: tuple[str, bytes], headers: RawHeaders, body: bytes) -> None:
        cost = len(key[1]) + len(body)
        if cost > self.max_bytes // 8 or key in self._items:
            return
        self._items[key] = (headers, body)
        self.size += cost
        while len(self._items) > self.max_entries or self.size > self.max_bytes:
            (_, old_body), (_, old_answer) = self._items.popitem(last=False)
            self.size -= len(old_body) + len(old_answer)


class ResponseCacheMiddleware:
    """Serve repeated POSTs to ``paths`` from a :class:`ResponseCache`.

    Bodies larger than ``max_body`` are passed through uncached (they are
    rarely repeated and would crowd out the presets).
    """

    def __init__(
        self, app: ASGIApp, paths: frozenset[str], cache: ResponseCache, max_body: int = 65536
    ) -> None:
        self.app = app
        self.paths = paths
        self.cache = cache
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        read = await self._read_body(receive)
        if read is None:  # client went away
            return
        body, more = read
        cacheable = not more and len(body) <= self.max_body
        key = (scope["path"], body)
        hit = self.cache.get(key) if cacheable else None
        if hit is not None:
            cached_headers, answer = hit
            # A copy: outer middleware (GZip) edits the list in place, and the
            # edits (content-encoding, a compressed length) must not stick.
            start = {"type": "http.response.start", "status": 200, "headers": list(cached_headers)}
            await send(start)
            await send({"type": "http.response.body", "body": answer})
            return
        await self._answer(scope, receive, send, key, more, cacheable)

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool] | None:
        """The request's body up to just past ``max_body`` and whether more follows (None:
        the client went away)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_body or not message.get("more_body", False):
                break
        return b"".join(chunks), bool(message.get("more_body", False))

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        key: tuple[str, bytes],
        more: bool,
        cacheable: bool,
    ) -> None:
        """The app answers the body read (replayed, then the rest); a whole 200 is stored."""
        body = key[1]
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        status = 0
        headers: RawHeaders = []
        parts: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status, headers = message["status"], list(message.get("headers", []))
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))
                if not message.get("more_body", False) and status == 200 and cacheable:
                    self.cache.put(key, headers, b"".join(parts))
            await send(message)

        await self.app(scope, replay, capture)
