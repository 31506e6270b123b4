"""Run a training job in a child process and relay its event stream.

One process per run (``python -m app.training.worker``): torch's threads,
memory and CPU priority stay out of the server's way, and stopping a run is
killing a process, which frees its CPU at once.  ``TrainingSlots`` bounds the
runs one server process streams at a time (a counter: the event loop is one
thread); a request beyond it gets a 429.  A run outlives nothing: when the
client goes away, the stream's ``finally`` kills the child.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from attention_core.training import new_run_name

from ..settings import Settings
from .request import TrainJob
from .sse import error_frame
from .worker import EXIT_ERROR_SENT

log = logging.getLogger("attention_viz.training")

# Seconds a killed child may take to be reaped before the stream gives up waiting.
REAP_SECONDS = 5.0
# Seconds past the run's deadline a response may still spend sending its last frames
# (the time-limit error) before it is cut off: a client that stopped reading loses its
# run, and the slot and the child's memory are free at the deadline plus this.
STALLED_GRACE_S = 1.0


def cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class TrainingSlots:
    """At most ``total`` runs at once in this process."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.busy = 0
        self.children: set[int] = set()  # PIDs of running children (tests look)

    def try_acquire(self) -> bool:
        if self.busy >= self.total:
            return False
        self.busy += 1
        return True

    def release(self) -> None:
        self.busy = max(self.busy - 1, 0)


def slots_for(settings: Settings) -> TrainingSlots:
    return TrainingSlots(settings.train_concurrent or cpu_count())


def writable_runs_dir(settings: Settings) -> Path | None:
    """The runs directory, created if need be; None when it cannot be written."""
    path = settings.runs_path().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


def _job_json(job: TrainJob, name: str, runs_dir: Path, settings: Settings) -> bytes:
    payload: dict[str, Any] = {
        "config": job.config.to_dict(),
        "text": job.text,
        "name": name,
        "runs_dir": str(runs_dir),
        "keep": settings.runs_keep,
        "threads": settings.train_threads,
        "nice": settings.train_nice,
        "run_info": {"name": name, "text_source": job.source, "trained_by": "POST /api/train"},
    }
    return orjson.dumps(payload)


async def start_run(
    job: TrainJob, runs_dir: Path, settings: Settings
) -> tuple[str, asyncio.subprocess.Process]:
    """Start the worker with the job on its stdin; returns (model name, process)."""
    name = new_run_name(job.config.architecture)
    threads = str(settings.train_threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        f"{__package__}.worker",  # app.training.worker; attention_viz.training.worker installed
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert process.stdin is not None
    try:
        process.stdin.write(_job_json(job, name, runs_dir, settings))
        await process.stdin.drain()
        process.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # it died at once; the stream reports its exit code
    return name, process


def run_deadline(settings: Settings) -> float:
    """When a run starting now must end, on ``anyio.current_time()``'s clock."""
    return anyio.current_time() + settings.train_max_seconds


async def relay(
    process: asyncio.subprocess.Process,
    slots: TrainingSlots,
    settings: Settings,
    deadline: float,
) -> AsyncIterator[bytes]:
    """The child's frames as they come; kills it if the client leaves or time runs out.

    Holds one of ``slots`` (acquired by the caller) until the child is gone.  The
    deadline is kept here while the client reads; a client that stops reading
    leaves this generator paused at a ``yield``, and ``EventStreamResponse`` stops
    the whole response at the same deadline (plus ``STALLED_GRACE_S``).
    """
    slots.children.add(process.pid)
    try:
        yield b": the run starts\n\n"  # headers and a first byte out now: the child takes ~2 s
        assert process.stdout is not None
        while True:
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                    chunk = await process.stdout.read(1 << 16)
            except TimeoutError:
                yield error_frame(
                    ["train"],
                    f"the run took longer than {settings.train_max_seconds:g} s and was stopped "
                    "(ATTENTION_VIZ_TRAIN_MAX_SECONDS); ask for fewer max_steps",
                    "limit_exceeded",
                )
                break
            if not chunk:
                break
            yield chunk
        if process.returncode is None and anyio.current_time() < deadline:
            with anyio.move_on_after(REAP_SECONDS):
                await process.wait()
        code = process.returncode
        if code not in (0, EXIT_ERROR_SENT, None):
            yield error_frame(
                ["train"],
                f"the training process ended unexpectedly (exit code {code})",
                "run_failed",
            )
    finally:
        _kill(process)  # its CPU is free from here: the slot is too
        slots.children.discard(process.pid)
        slots.release()
        with anyio.CancelScope(shield=True), anyio.move_on_after(REAP_SECONDS):
            await process.wait()


class EventStreamResponse(StreamingResponse):
    """``text/event-stream``, never cached or buffered by a proxy; always closes its iterator.

    Starlette cancels the stream when the client disconnects but leaves a
    generator that was paused at a ``yield`` to the garbage collector: closing
    it here runs ``relay``'s ``finally`` (which kills the child) at once.
    """

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[bytes], deadline: float = math.inf) -> None:
        super().__init__(
            content, headers={"cache-control": "no-cache, no-store", "x-accel-buffering": "no"}
        )
        self._closable = content
        self.deadline = deadline  # anyio.current_time() after which sending stops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            # A send blocked on a client that does not read (a full socket buffer) is
            # cancelled here: the server then closes the connection.
            with anyio.CancelScope(deadline=self.deadline) as cutoff:
                await super().__call__(scope, receive, send)
            if cutoff.cancelled_caught:
                log.warning(
                    "a training stream was cut off at its time limit: the client stopped reading"
                )
        finally:
            aclose = getattr(self._closable, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        try:
            process.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
