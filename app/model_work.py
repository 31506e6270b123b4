"""Model work apart from everything else: its own threads, a bounded line, a deadline,
and a stop when the client leaves.

- **Threads**: a model request runs on one of ``MODEL_THREADS`` threads (``model_limiter``,
  its own ``CapacityLimiter``), never in anyio's default pool; pages, listings and every
  other plain ``def`` handler keep that pool to themselves, so they never wait behind a
  forward pass (issue 32, bench/bench_mixed_load.py).
- **Line**: past ``ATTENTION_VIZ_MODEL_QUEUE`` requests waiting for a model thread, a new
  one is refused at once: 429 with ``Retry-After``.
- **Deadline**: ``ATTENTION_VIZ_MODEL_DEADLINE_SECONDS`` after it arrived (waiting
  included), a request's work stops at its next report (``attention_core.progress``:
  after each layer) and it is answered 503 ``deadline_exceeded``; its thread is free.
- **Client gone**: a closed connection stops the work the same way (within one layer),
  or, while it still waits, takes it out of the line.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TypeVar, cast

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar
from fastapi import Request, Response
from starlette.types import Receive

from attention_core.models import ModelRegistry
from attention_core.progress import Cancelled, reporting

from . import compute
from .errors import error_response
from .model_registry import get_registry
from .settings import Settings

T = TypeVar("T")

RETRY_AFTER_SECONDS = 5
# The client left: no one reads the answer (nginx's name for it).
CLIENT_CLOSED = 499
DEADLINE = "deadline"
CLIENT = "client"
_STOPPED = object()  # what a stopped job's thread returns

_model_limiter: RunVar[anyio.CapacityLimiter] = RunVar("attention_viz_model_limiter")
# The hop to a thread once a model thread is held: never the one that waits.
_hop_limiter: RunVar[anyio.CapacityLimiter] = RunVar("attention_viz_model_hop")


def model_limiter() -> anyio.CapacityLimiter:
    """This event loop's model threads (``compute.MODEL_THREADS`` when first asked)."""
    return compute.per_loop(_model_limiter, compute.MODEL_THREADS)


def _hop() -> anyio.CapacityLimiter:
    return compute.per_loop(_hop_limiter, math.inf)


def refuse_when_full(settings: Settings) -> Response | None:
    """A 429 when every model thread is busy and the line is full, else None."""
    limiter = model_limiter()
    waiting = limiter.statistics().tasks_waiting
    if limiter.available_tokens >= 1 or waiting < settings.model_queue:
        return None
    return error_response(
        429,
        [],
        f"{waiting} model requests are already waiting for a model thread; the limit is "
        f"{settings.model_queue} (ATTENTION_VIZ_MODEL_QUEUE): try again in a few seconds",
        "queue_full",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        ctx={"limit": settings.model_queue, "found": waiting, "setting": "model_queue"},
    )


class ModelJob:
    """One request's model work: run it once a model thread is free; ``stop`` it (the client
    left, the deadline passed) and it leaves the line or stops at its next report."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.reason: str | None = None
        self._waiting: anyio.CancelScope | None = None

    def stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.cancelled.set()
        if self._waiting is not None:
            self._waiting.cancel()

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a model thread; ``Cancelled`` when stopped before it ends."""
        limiter = model_limiter()
        acquired = False
        with anyio.CancelScope() as waiting:
            self._waiting = waiting
            if not self.cancelled.is_set():
                await limiter.acquire()
                acquired = True
        self._waiting = None
        if not acquired:
            raise Cancelled("stopped while waiting for a model thread")
        try:
            result = await anyio.to_thread.run_sync(self._call, fn, limiter=_hop())
        finally:
            limiter.release()
        if result is _STOPPED:
            raise Cancelled("stopped")
        return cast(T, result)

    def _call(self, fn: Callable[[], T]) -> T | object:
        """On the model thread: ``fn()``, or ``_STOPPED``.  ``Cancelled`` is not raised
        across the thread: its traceback holds the pass's frames (a generation's KV cache
        and maps), and anyio's future, which holds the exception, is in one of those
        frames: a cycle that kept gigabytes until the cyclic GC ran (issue 32 item 9)."""
        if self.cancelled.is_set():
            return _STOPPED
        try:
            return fn()
        except Cancelled:
            return _STOPPED

    async def watch(self, receive: Receive, deadline_seconds: float) -> None:
        """Stop the job when the client disconnects or the deadline passes (run it as a task)."""

        async def disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.stop(CLIENT)

        async with anyio.create_task_group() as group:
            group.start_soon(disconnect)
            if deadline_seconds > 0:
                await anyio.sleep(deadline_seconds)
                self.stop(DEADLINE)

    def stopped_response(self, settings: Settings) -> Response:
        """The answer of a stopped job: the deadline's 503 (or, client gone, a 499 no one reads)."""
        if self.reason != DEADLINE:
            return error_response(CLIENT_CLOSED, [], "the client closed the connection", "closed")
        limit = settings.model_deadline_seconds
        return error_response(
            503,
            [],
            f"the model work ran past its deadline of {limit:g} s "
            "(ATTENTION_VIZ_MODEL_DEADLINE_SECONDS) and was stopped: ask for less "
            "(a shorter text, fewer layers)",
            "deadline_exceeded",
            ctx={"limit": limit, "setting": "model_deadline_seconds"},
        )


async def model_answer(request: Request, work: Callable[[ModelRegistry], Response]) -> Response:
    """``work(registry)`` (a plain model POST's handler body) as a ``ModelJob``: on a model
    thread, stopped by the deadline or a closed connection, refused when the line is full."""
    settings: Settings = request.app.state.settings
    full = refuse_when_full(settings)
    if full is not None:
        return full
    registry = get_registry(request)
    job = ModelJob()

    def call() -> Response:
        with reporting(None, job.cancelled):
            return work(registry)

    outcome: Response | BaseException
    async with anyio.create_task_group() as group:
        group.start_soon(job.watch, request.receive, settings.model_deadline_seconds)
        try:
            outcome = await job.run(call)
        except Cancelled:
            outcome = job.stopped_response(settings)
        except Exception as exc:  # the handlers' errors: answered outside the task group
            outcome = exc
        group.cancel_scope.cancel()
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
