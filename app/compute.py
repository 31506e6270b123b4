"""Run core computations without stalling the event loop, and cheap work never behind dear.

Toy-sized traces take ~0.1-0.3 ms: cheaper to run inline on the event loop
than to hop to a thread (bench/bench_api.py measures both).  Larger ones go
to threads so that other requests keep flowing.

Two pools, so that cheap requests never queue behind expensive ones (issue 20,
bench/bench_mixed_load.py):

- **model work** (the real models' forward passes, hundreds of ms each): its
  own ``MODEL_THREADS`` threads (``app.model_work``): one fewer than the CPUs
  (at least 1), or ``ATTENTION_VIZ_MODEL_THREADS``.  The pages and listings
  (plain ``def`` handlers) keep anyio's default pool, ``PAGE_THREADS``.  The
  CPU left over serves the event loop
  (``/healthz``, the toy API, the pages) and a training run; a model request
  beyond the pool waits in line, which costs no CPU.
- **toy work** too big to run inline: its own ``TOY_LIMITER`` of
  ``COMPUTE_THREADS`` threads (the CPUs, or ``ATTENTION_VIZ_COMPUTE_THREADS``),
  so it never waits for a model's thread.

More CPU-bound threads than cores add no throughput and starve the event loop:
with anyio's default of 40, 64 connections asking for the scaling lesson on 2
cores delayed ``/healthz`` by ~5 s (bench/bench_load.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import anyio
from anyio.lowlevel import RunVar

from .schemas.attention import (
    AttentionOptions,
    ExplicitEmbeddingIn,
    ExplicitProjectionIn,
    HashedEmbeddingIn,
    SeededRandomEmbeddingIn,
)

T = TypeVar("T")

# Multiply-adds (queries × keys × width) below which a request runs inline.
# ATTENTION_VIZ_INLINE_WORK overrides it for bench/bench_api.py (-1: always offload).
INLINE_WORK = int(os.environ.get("ATTENTION_VIZ_INLINE_WORK", 32 * 32 * 32))
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
COMPUTE_THREADS = int(os.environ.get("ATTENTION_VIZ_COMPUTE_THREADS", 0) or CPUS)
MODEL_THREADS = int(os.environ.get("ATTENTION_VIZ_MODEL_THREADS", 0) or max(CPUS - 1, 1))
# Pages, listings and the other plain ``def`` handlers: cheap work (file reads, templates).
PAGE_THREADS = max(4, 2 * CPUS)
# One per event loop (as anyio's own default limiter): a limiter belongs to its loop.
_toy_limiter: RunVar[anyio.CapacityLimiter] = RunVar("attention_viz_toy_limiter")


def per_loop(var: RunVar[anyio.CapacityLimiter], total: float) -> anyio.CapacityLimiter:
    """``var``'s limiter, made with ``total`` tokens on first use (one per event loop)."""
    try:
        return var.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(total)
        var.set(limiter)
        return limiter


def toy_limiter() -> anyio.CapacityLimiter:
    """The toy work's threads, apart from the model work's and the pages'."""
    return per_loop(_toy_limiter, COMPUTE_THREADS)


def width_of(options: AttentionOptions) -> int:
    """The widest vector a request will build (a rough cost measure)."""
    e, p = options.embedding, options.projection
    if isinstance(e, ExplicitEmbeddingIn):
        width = max((len(v) for v in e.vectors), default=1)
    elif isinstance(e, SeededRandomEmbeddingIn | HashedEmbeddingIn):
        width = e.dim
    else:
        width = max([4, *(len(v) for v in e.extra.values())])
    if isinstance(p, ExplicitProjectionIn):
        width = max([width, *(len(p.W_query[0]) if p.W_query else 0,)])
    elif hasattr(p, "d_out"):
        width = max(width, p.d_out)
    return width


async def offload(work: int, fn: Callable[..., T], *args: object) -> T:
    """Call ``fn(*args)`` inline when ``work`` is small, else on a toy-work thread."""
    if work <= INLINE_WORK:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args, limiter=toy_limiter())
