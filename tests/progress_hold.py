"""A slow model request made slow deterministically: a forward hook holds one layer of the
server's model until the server cancels that pass (the client closed its connection),
instead of a sleep racing the server.  Used by the stream's API and browser tests, which
serve the app from a thread of the test process (``devtools.server.serve_in_thread``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio.from_thread

from app.model_work import model_limiter
from attention_core.progress import Cancelled, muted, report

HOLD_SECONDS = 30  # a hold no cancel releases ends here, and its test fails


@contextmanager
def held(model: Any, layer: int) -> Iterator[dict[str, int]]:
    """The next pass through block ``layer`` (0-based) of ``model`` (a hand-written GPT-2
    ``Decoder``) waits there until its request is cancelled.  Yields counts: ``held`` (the
    hold happened), ``cancelled`` (a cancel released it, not the time limit),
    ``first_block`` and ``last_block`` (passes through the first and the last block
    since), and while it holds ``waiting``: the requests waiting for a model thread (the
    model limiter of the server's event loop, asked from the held thread)."""
    blocks = model.model.transformer.h
    seen = {"held": 0, "cancelled": 0, "first_block": 0, "last_block": 0, "waiting": -1}

    def waiting() -> int:
        return int(model_limiter().statistics().tasks_waiting)

    def hold(*_: Any) -> None:
        if seen["held"]:
            return
        seen["held"] = 1
        deadline = time.monotonic() + HOLD_SECONDS
        with muted():  # reports here only ask whether the pass was cancelled
            while time.monotonic() < deadline:
                seen["waiting"] = anyio.from_thread.run_sync(waiting)
                try:
                    report("hold", 0, 1)
                except Cancelled:
                    seen["cancelled"] = 1
                    return  # the block returns: the pass's own next report must stop it
                time.sleep(0.01)

    def count(name: str) -> Any:
        def counted(*_: Any) -> None:
            seen[name] += 1

        return counted

    handles = [
        blocks[0].register_forward_hook(count("first_block")),
        blocks[layer].register_forward_hook(hold),
        blocks[len(blocks) - 1].register_forward_hook(count("last_block")),
    ]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()
