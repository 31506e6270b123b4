"""A model request's answer streamed as Server-Sent Events: progress, then the answer.

``WorkStreamResponse(work)`` runs ``work()`` (it returns the plain POST's JSON
body) on a model thread inside ``attention_core.progress.reporting`` and sends:

- ``progress``: each ``report(stage, done, total)`` the work makes (a forward
  pass: after each layer), with the seconds elapsed and, once a unit is done,
  an estimate of the stage's remaining seconds (the stage's pace so far: a
  forward pass's layers cost about the same);
- then one ``result`` (``data``: exactly the POST's body) or one ``error``
  (``data``: the POST's error body and its ``status``).

Closing the connection (the page aborting an older request) sets the work's
``cancelled`` event: its next report raises ``Cancelled``, so the pass stops
within one layer and its thread returns to the pool; nothing of a cancelled
pass is cached (the result caches keep finished passes only).  A request still
waiting for a model thread when the client leaves never starts.  The plain POSTs'
deadline and line (``app.model_work``) hold here too: past the deadline the
stream ends with an ``error`` event (503 ``deadline_exceeded``); a full line is
a 429 before the stream starts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.to_thread
import orjson
from anyio.streams.memory import MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from attention_core.progress import Cancelled, reporting

from .errors import INTERNAL_ERROR, error_response, known_error_response
from .json_reply import json_response
from .model_work import CLIENT, DEADLINE, ModelJob, model_limiter, refuse_when_full
from .settings import Settings
from .training.sse import frame

log = logging.getLogger(__name__)

# Sent before the work starts when every model thread is busy (it waits in line).
QUEUED = "queued"


class _Pace:
    """Seconds elapsed since the work started, and a stage's remaining seconds at its pace."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.stage = ""
        self.stage_started = self.started

    def event(self, stage: str, done: int, total: int) -> dict[str, object]:
        now = time.monotonic()
        if stage != self.stage:
            self.stage, self.stage_started = stage, now
        spent = now - self.stage_started
        eta = spent / done * (total - done) if 0 < done <= total else None
        return {
            "stage": stage,
            "done": done,
            "total": total,
            "elapsed_s": round(now - self.started, 3),
            "eta_s": None if eta is None else round(eta, 3),
        }


def error_frame(response: Response) -> bytes:
    """An error answer as the ``error`` event: its status and its JSON body."""
    return frame("error", {"status": response.status_code, **orjson.loads(response.body)})


def result_frame(payload: object) -> bytes:
    """The ``result`` event: the body ``json_response(payload)`` sends, as it is."""
    return b"event: result\ndata: " + bytes(json_response(payload).body) + b"\n\n"


class WorkStreamResponse(Response):
    """``text/event-stream`` of one model request's progress and answer (see the module)."""

    media_type = "text/event-stream"

    def __init__(self, work: Callable[[], object]) -> None:
        # no-cache, not no-store: Chromium reports a no-store fetch stream read to its end
        # as aborted (playwright#42742); a POST's answer is not stored either way.
        super().__init__(headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        # Sent as it comes: no length (``Response`` declares its empty body's 0).
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.work = work

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings: Settings = scope["app"].state.settings
        full = refuse_when_full(settings)
        if full is not None:
            await full(scope, receive, send)
            return
        job = ModelJob()
        frames_in, frames_out = anyio.create_memory_object_stream[bytes](math.inf)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await job.watch(receive, settings.model_deadline_seconds)
                if job.reason != DEADLINE:
                    group.cancel_scope.cancel()  # the client left: no one reads the rest

            group.start_soon(watch)
            group.start_soon(self._run, frames_in, job, settings)
            try:
                async with frames_out:
                    async for chunk in frames_out:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                # Whatever ended the stream (the answer, a disconnect, a failed send), the
                # work stops at its next report instead of running on for no one.
                job.stop(CLIENT)
                group.cancel_scope.cancel()

    async def _run(
        self, frames: MemoryObjectSendStream[bytes], job: ModelJob, settings: Settings
    ) -> None:
        async with frames:
            if model_limiter().available_tokens < 1:
                _send(frames, frame("progress", _Pace().event(QUEUED, 0, 0)))
            try:
                result = await job.run(lambda: self._work(frames, job.cancelled))
            except Cancelled:
                if job.reason == DEADLINE:
                    _send(frames, error_frame(job.stopped_response(settings)))
                return  # else the client left: no one reads the rest
            except Exception as exc:  # the POST's handlers' answer, or theirs to a bug
                known = known_error_response(exc)
                if known is None:
                    log.exception("a streamed model request failed")
                    known = error_response(500, [], INTERNAL_ERROR, "internal_error")
                _send(frames, error_frame(known))
                return
            _send(frames, result)

    def _work(self, frames: MemoryObjectSendStream[bytes], cancelled: threading.Event) -> bytes:
        """On a model thread: the work, each report sent to the event loop as a frame, and
        its ``result`` frame (serialized here: megabytes would stall the event loop)."""
        pace = _Pace()

        def on_progress(stage: str, done: int, total: int) -> None:
            chunk = frame("progress", pace.event(stage, done, total))
            if not anyio.from_thread.run_sync(_send, frames, chunk):
                raise Cancelled(f"{stage}: the stream was closed after {done} of {total}")

        with reporting(on_progress, cancelled):
            return result_frame(self.work())


def _send(frames: MemoryObjectSendStream[bytes], chunk: bytes) -> bool:
    """Queue ``chunk`` for the client; False once the stream is closed (the client left)."""
    try:
        frames.send_nowait(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        return False
    return True
