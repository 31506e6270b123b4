"""Issue 32 item 3: a client that stops reading no longer holds memory (its answer is
dropped after ATTENTION_VIZ_WRITE_TIMEOUT_SECONDS), and a big answer is compressed off
the event loop.  uvicorn in a thread of this process; a raw socket that never reads."""

from __future__ import annotations

import gc
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import Response

from app.main import create_app
from app.settings import Settings
from app.slow_readers import CHUNK_BYTES
from devtools.server import free_port

BIG = 32 * 2**20  # an answer far larger than the sockets' buffers


class Tracked(Response):
    """A response whose lifetime the test can see (a weak reference to it)."""


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[weakref.ref[Tracked]], list[str], Any]]:
    """(URL, the big answers made, the event loop's thread names, the uvicorn server)."""
    import uvicorn

    app = create_app(Settings(write_timeout_seconds=0.5))
    answers: list[weakref.ref[Tracked]] = []
    compressed_on: list[str] = []

    @app.get("/test/big")
    async def big() -> Response:
        answer = Tracked(b"x" * BIG, media_type="application/octet-stream")
        answers.append(weakref.ref(answer))
        return answer

    @app.get("/test/big-text")
    async def big_text() -> Response:
        compressed_on.append(threading.current_thread().name)  # the event loop's thread
        return Response(b"attention " * (BIG // 10), media_type="text/plain")

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        until(lambda: server.started)
        yield f"http://127.0.0.1:{port}", answers, compressed_on, server
    finally:
        server.should_exit = True
        thread.join(30)


def buffered(server: Any) -> int:
    """Bytes the server's connections hold in their write buffers (not yet in the socket)."""
    return sum(
        c.transport.get_write_buffer_size()
        for c in list(server.server_state.connections)
        if c.transport is not None
    )


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the state"
        gc.collect()
        time.sleep(0.05)


def test_a_client_that_stops_reading_is_dropped_and_its_answer_freed(served: Any) -> None:
    url, answers, _, server = served
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET /test/big HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    try:
        until(lambda: len(answers) == 1)
        # Dropped while the client still holds its socket: the answer is freed (while it is
        # sent piece by piece its response is alive) and at most one piece of it stays in
        # the connection's buffer (uvicorn copies a body there whole: 30 MB).
        until(lambda: answers[0]() is None and 0 < buffered(server) <= CHUNK_BYTES)
        assert httpx.get(f"{url}/healthz").text == "ok"
    finally:
        sock.close()


def test_a_client_that_reads_gets_the_whole_answer(served: Any) -> None:
    url, _, _, _ = served
    answer = httpx.get(f"{url}/test/big", timeout=60)
    assert answer.status_code == 200 and len(answer.content) == BIG


def test_a_big_answer_is_compressed_off_the_event_loop(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.middleware import gzip

    url, _, loop_threads, _ = served
    threads: list[str] = []
    compress = gzip.GZipResponder._compress_body

    def recorded(self: Any, body: bytes, more_body: bool) -> bytes:
        threads.append(threading.current_thread().name)
        return compress(self, body, more_body)

    monkeypatch.setattr(gzip.GZipResponder, "_compress_body", recorded)
    answer = httpx.get(f"{url}/test/big-text", headers={"accept-encoding": "gzip"}, timeout=60)
    assert answer.headers["content-encoding"] == "gzip"
    assert answer.content == b"attention " * (BIG // 10)
    assert threads and loop_threads[-1] not in threads  # never on the event loop's thread
