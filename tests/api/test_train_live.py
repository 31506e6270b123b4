"""POST /api/train against a live uvicorn over real sockets: a busy server answers 429,
closing the connection kills the run's process, and a run over the time limit is stopped
with an error event."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.server import start_server, stop_server
from tests.processes import EXIT_BOUND_S, all_exited, exited, workers_of

LONG_RUN = {
    "architecture": "gpt",
    "n_layer": 1,
    "n_embd": 16,
    "block_size": 16,
    "batch_size": 4,
    "max_steps": 5000,
    "eval_every": 0,
    "snapshot_every": 100,
    "sample_chars": 0,
}
# A run far longer than EXIT_BOUND_S on any machine (it would stop at the default
# 900 s time limit first): a worker gone within the bound was killed, not finished.
ENDLESS_STEPS = 1_000_000
ENDLESS_RUN = {**LONG_RUN, "max_steps": ENDLESS_STEPS}


def server(runs: Path, **env: str) -> tuple[str, object]:
    base = {"ATTENTION_VIZ_RUNS_DIR": str(runs), "ATTENTION_VIZ_TRAIN_NICE": "0"}
    return start_server({**base, **{f"ATTENTION_VIZ_{k.upper()}": v for k, v in env.items()}})


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    url, process = server(
        tmp_path_factory.mktemp("runs"), train_concurrent="1", train_max_steps=str(ENDLESS_STEPS)
    )
    try:
        yield url, process.pid
    finally:
        stop_server(process)


def read_until(lines: Iterator[str], event: str) -> None:
    for line in lines:
        if line == f"event: {event}":
            return
    raise AssertionError(f"the stream ended before an {event!r} event")


def test_busy_server_answers_429_and_a_disconnect_kills_the_run(one_slot) -> None:
    url, server_pid = one_slot
    with httpx.Client(base_url=url, timeout=120) as client:
        with client.stream("POST", "/api/train", json=ENDLESS_RUN) as running:
            assert running.status_code == 200
            lines = running.iter_lines()
            read_until(lines, "progress")  # the worker is training now
            (worker,) = workers_of(server_pid)

            busy = client.post("/api/train", json=ENDLESS_RUN)
            assert busy.status_code == 429
            assert busy.headers["retry-after"] == "30"
            (item,) = busy.json()["detail"]
            assert "already running 1 training run(s)" in item["msg"]
            assert "ATTENTION_VIZ_TRAIN_CONCURRENT" in item["msg"]
        # Leaving the block closes the connection: the worker is killed.  Waited for on
        # its exit; the bound only fails a worker that outlives it (an endless run would).
        assert exited(worker), f"the run's process lived {EXIT_BOUND_S:g} s after close"

        # The slot is free again: the next run starts (and is closed at once).
        with client.stream("POST", "/api/train", json=ENDLESS_RUN) as again:
            assert again.status_code == 200
            started = workers_of(server_pid)  # its process exists once the answer starts
        assert started and all_exited(started)
    assert workers_of(server_pid) == []


def test_a_run_over_the_time_limit_is_stopped_with_an_error(tmp_path: Path) -> None:
    url, process = server(tmp_path, train_max_seconds="3")
    try:
        # The client's read timeout fails a run that is never stopped; the error event
        # below is the time limit's own (no wall-clock guess at when it came).
        with httpx.Client(base_url=url, timeout=60) as client:
            with client.stream("POST", "/api/train", json=LONG_RUN) as response:
                body = "\n".join(response.iter_lines())
        last = [line for line in body.splitlines() if line.startswith("event: ")][-1]
        assert last == "event: error"
        assert "the run took longer than 3 s and was stopped" in body
        assert "ATTENTION_VIZ_TRAIN_MAX_SECONDS" in body
        assert list(tmp_path.iterdir()) == []  # nothing saved
        assert all_exited(workers_of(process.pid))
        assert workers_of(process.pid) == []
    finally:
        stop_server(process)
