"""Progress of long work, reported as it goes, and its cancellation.

A caller that wants progress (the streaming endpoint, the CLI's bar) runs the
work inside ``reporting(on_progress, cancelled)``; deep inside, the work calls
``report(stage, done, total)`` after each unit (a forward pass: after each
layer).  Every report also checks ``cancelled`` and raises ``Cancelled``, so a
newer request or a closed connection stops an older pass within one unit.
Outside ``reporting`` a report costs one ContextVar lookup.

The reporter lives in a ``ContextVar``: a thread pool that copies the context
(anyio's ``to_thread``, ``contextvars.copy_context().run``) carries it into
the worker thread; a bare ``threading.Thread`` does not.

Why a context variable here, when every other option of a forward pass is an
argument (``ForwardOptions.blocked``, the transformers backend's
``AttentionRun``, the head edits' hooks held for one run): a request's reporter
spans all its work (loading a checkpoint, each forward pass, each token of a
generation), and part of that work runs in code this package does not call:
transformers' own loading loop (``from_pretrained`` walking the tensors in its
``tqdm``, wrapped once for every load by ``hf.load_progress``) reports each
layer it reads, and no argument of ours reaches it.  Several requests load and
run models at once, each reporting to (and cancelled by) its own caller, so
that loop can only find its caller's reporter in the context of the thread it
runs on.  It is the package's one context variable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# (stage, done, total): e.g. ("forward", 3, 12) after the third of 12 layers.
ProgressCallback = Callable[[str, int, int], None]


class Cancelled(Exception):
    """The work was cancelled (its ``cancelled`` event was set) before it finished."""


class StopForward(Exception):
    """Raised by a hook that already holds what it needed: the rest of the forward pass
    is skipped on purpose (not a failure, so no backend reports it as one)."""


@dataclass(frozen=True)
class _Reporter:
    on_progress: ProgressCallback | None
    cancelled: threading.Event | None


_CURRENT: ContextVar[_Reporter | None] = ContextVar("attention_viz_progress", default=None)


@contextmanager
def reporting(
    on_progress: ProgressCallback | None = None, cancelled: threading.Event | None = None
) -> Iterator[None]:
    """Send this context's ``report`` calls to ``on_progress``; stop when ``cancelled`` is set."""
    token = _CURRENT.set(_Reporter(on_progress, cancelled))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def report(stage: str, done: int, total: int) -> None:
    """``done`` of ``total`` units of ``stage`` are finished; ``Cancelled`` if asked to stop."""
    reporter = _CURRENT.get()
    if reporter is None:
        return
    if reporter.cancelled is not None and reporter.cancelled.is_set():
        raise Cancelled(f"{stage} cancelled after {done} of {total}")
    if reporter.on_progress is not None:
        reporter.on_progress(stage, done, total)


@contextmanager
def muted() -> Iterator[None]:
    """Reports inside reach no one but still check for cancellation.

    For the sub-steps of a unit reported on its own: a generation reports each
    token written, not each layer of each token's forward pass.
    """
    reporter = _CURRENT.get()
    if reporter is None:
        yield
        return
    with reporting(None, reporter.cancelled):
        yield
