"""Run core computations without stalling the event loop.

Toy-sized traces take ~0.1-0.3 ms: cheaper to run inline on the event loop
than to hop to the thread pool (bench/bench_api.py measures both).  Larger
ones go to the thread pool so that other requests keep flowing.

The thread pool (shared with the model's sync handlers) has ``COMPUTE_THREADS``
threads, set by the app's lifespan: the CPUs this process may use, or
``ATTENTION_VIZ_COMPUTE_THREADS``.  More CPU-bound threads than cores add no
throughput and starve the event loop: with anyio's default of 40, 64
connections asking for the scaling lesson on 2 cores delayed ``/healthz`` by
~5 s (bench/bench_load.py); waiting in line for a thread costs no CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

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
COMPUTE_THREADS = int(
    os.environ.get("ATTENTION_VIZ_COMPUTE_THREADS", 0)
    or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
)


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
    """Call ``fn(*args)`` inline when ``work`` is small, else in the thread pool."""
    if work <= INLINE_WORK:
        return fn(*args)
    return await run_in_threadpool(fn, *args)
