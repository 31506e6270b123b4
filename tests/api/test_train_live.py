"""POST /api/train against a live uvicorn over real sockets: a busy server answers 429,
closing the connection kills the run's process within a second, and a run over the time
limit is stopped with an error event."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.server import start_server, stop_server

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


def server(runs: Path, **env: str) -> tuple[str, object]:
    base = {"ATTENTION_VIZ_RUNS_DIR": str(runs), "ATTENTION_VIZ_TRAIN_NICE": "0"}
    return start_server({**base, **{f"ATTENTION_VIZ_{k.upper()}": v for k, v in env.items()}})


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    url, process = server(tmp_path_factory.mktemp("runs"), train_concurrent="1")
    try:
        yield url, process.pid
    finally:
        stop_server(process)


def workers_of(pid: int) -> list[int]:
    """PIDs of the training processes the server ``pid`` started (still running, not zombies)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"app.training.worker" in cmdline:
            found.append(int(stat.parent.name))
    return found


def read_until(lines: Iterator[str], event: str) -> None:
    for line in lines:
        if line == f"event: {event}":
            return
    raise AssertionError(f"the stream ended before an {event!r} event")


def test_busy_server_answers_429_and_a_disconnect_kills_the_run(one_slot) -> None:
    url, server_pid = one_slot
    with httpx.Client(base_url=url, timeout=120) as client:
        with client.stream("POST", "/api/train", json=LONG_RUN) as running:
            assert running.status_code == 200
            lines = running.iter_lines()
            read_until(lines, "progress")  # the worker is training now
            (worker,) = workers_of(server_pid)

            busy = client.post("/api/train", json=LONG_RUN)
            assert busy.status_code == 429
            assert busy.headers["retry-after"] == "30"
            (item,) = busy.json()["detail"]
            assert "already running 1 training run(s)" in item["msg"]
            assert "ATTENTION_VIZ_TRAIN_CONCURRENT" in item["msg"]
            closed_at = time.monotonic()
        # Leaving the block closes the connection: the worker must be gone within a second.
        while worker in workers_of(server_pid) and time.monotonic() - closed_at < 5:
            time.sleep(0.02)
        stopped_after = time.monotonic() - closed_at
        assert worker not in workers_of(server_pid)
        assert stopped_after < 1.0, f"the run's process lived {stopped_after:.2f} s after close"

        # The slot is free again: the next run starts (and is closed at once).
        with client.stream("POST", "/api/train", json=LONG_RUN) as again:
            assert again.status_code == 200
    deadline = time.monotonic() + 5
    while workers_of(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers_of(server_pid) == []


def test_a_run_over_the_time_limit_is_stopped_with_an_error(tmp_path: Path) -> None:
    url, process = server(tmp_path, train_max_seconds="3")
    try:
        started = time.monotonic()
        with httpx.Client(base_url=url, timeout=60) as client:
            with client.stream("POST", "/api/train", json=LONG_RUN) as response:
                body = "\n".join(response.iter_lines())
        assert time.monotonic() - started < 20
        last = [line for line in body.splitlines() if line.startswith("event: ")][-1]
        assert last == "event: error"
        assert "the run took longer than 3 s and was stopped" in body
        assert "ATTENTION_VIZ_TRAIN_MAX_SECONDS" in body
        assert list(tmp_path.iterdir()) == []  # nothing saved
        deadline = time.monotonic() + 5
        while workers_of(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers_of(process.pid) == []
    finally:
        stop_server(process)
