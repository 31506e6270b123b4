"""Issue 20 item 8: the training time limit holds when the client stops reading.

A client opens ``POST /api/train`` and never reads: the stream fills the socket
buffers and the server's ``send`` blocks.  The run must still end at
``ATTENTION_VIZ_TRAIN_MAX_SECONDS`` (plus ``STALLED_GRACE_S``): its process is
killed and its slot is free for the next client (the client loses its run, not
the server its slot).  A live uvicorn.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import orjson

from app.training.runner import STALLED_GRACE_S
from devtools.server import start_server, stop_server
from tests.processes import EXIT_BOUND_S, exited, workers_of

LIMIT_S = 8.0
PROBE = ("the bank was steep and the river rose over the bank and the mud was deep " * 4)[:256]
# A snapshot of 2 layers × 16 heads × 256 × 256 every step: ~2.8 MB of SSE per step, so
# the socket buffers (a few MB on loopback) fill within the first steps.
NOISY_RUN = {
    "architecture": "gpt",
    "n_layer": 2,
    "n_head": 16,
    "n_embd": 32,
    "block_size": 256,
    "batch_size": 1,
    "max_steps": 5000,
    "eval_every": 0,
    "snapshot_every": 1,
    "sample_chars": 0,
    "probe": PROBE,
}
QUIET_RUN = {**NOISY_RUN, "n_layer": 1, "block_size": 16, "snapshot_every": 0, "probe": "the"}


def open_and_stall(url: str, body: dict[str, object]) -> socket.socket:
    """Send ``POST /api/train`` from a socket with a tiny receive buffer, and read nothing."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    data = orjson.dumps(body)
    sock.sendall(
        b"POST /api/train HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode() + b"\r\n"
        b"\r\n" + data
    )
    return sock


def test_a_stalled_reader_loses_its_run_within_the_limit(tmp_path: Path) -> None:
    url, server = start_server(
        {
            "ATTENTION_VIZ_RUNS_DIR": str(tmp_path),
            "ATTENTION_VIZ_TRAIN_NICE": "0",
            "ATTENTION_VIZ_TRAIN_CONCURRENT": "1",
            "ATTENTION_VIZ_TRAIN_MAX_SECONDS": str(LIMIT_S),
        }
    )
    try:
        started = time.monotonic()
        stalled = open_and_stall(url, NOISY_RUN)
        try:
            # The request's process: waited for on the machine's own time, the bound
            # only fails a run that never starts.
            while not (workers := workers_of(server.pid)):
                assert time.monotonic() - started < EXIT_BOUND_S, "the run never started"
                time.sleep(0.02)
            (worker,) = workers
            with httpx.Client(base_url=url, timeout=30) as client:
                # While the stalled run holds the only slot, others are told to wait.
                assert client.post("/api/train", json=QUIET_RUN).status_code == 429
                # A stalled run never ends on its own (its worker blocks on a full pipe):
                # gone within the limit, the grace and a load-tolerant bound, it was
                # stopped by the limit, and not before it.
                assert exited(worker, LIMIT_S + STALLED_GRACE_S + EXIT_BOUND_S), (
                    f"the stalled run's worker lived {time.monotonic() - started:.1f} s after "
                    f"the request, with a {LIMIT_S:g} s limit"
                )
                assert time.monotonic() - started >= LIMIT_S
                assert workers_of(server.pid) == []
                with client.stream("POST", "/api/train", json=QUIET_RUN) as again:
                    assert again.status_code == 200  # the slot is free
            # The stalled client got its answer's start, and nothing more once it stalled.
            stalled.settimeout(10)
            assert stalled.recv(4096).startswith(b"HTTP/1.1 200 ")
        finally:
            stalled.close()
        assert list(tmp_path.iterdir()) == []  # nothing saved
    finally:
        stop_server(server)
