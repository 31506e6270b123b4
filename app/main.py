"""Builds the app: ``create_app()`` for tests and the CLI, ``app`` for FastAPI's usual commands.

``uvicorn app.main:app`` and ``fastapi run app/main.py`` serve the module-level
``app``, built from the environment's settings at import.  Building is cheap
(routes and middleware only); the work that takes time, warming the assets
and loading the model, happens in the lifespan or on first use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import torch
from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

from attention_core.models.base.device import check_device

from . import compute, memory, model_work
from .cache import ResponseCache, ResponseCacheMiddleware
from .errors import install_error_handlers
from .model_registry import build_registry, keep_freed_memory
from .openapi_numbers import with_integer_bounds
from .paths import STATIC_DIR
from .request_guard import RequestGuardMiddleware
from .routes import (
    api,
    assets,
    docs,
    generate,
    heads,
    health,
    model,
    model_page,
    model_stream,
    models,
    pages,
    runs,
    train,
    train_page,
    why,
)
from .security import BodyLimitMiddleware, SecuredFastAPI
from .settings import Settings, get_settings
from .slow_readers import WriteTimeoutMiddleware
from .static_files import RevalidatedStaticFiles
from .training.runner import slots_for
from .version import __version__

DESCRIPTION = """\
Self-attention, step by step. Every endpoint returns each intermediate tensor:
embeddings x, Q/K/V, raw scores, scaled scores, masked scores (masked entries
are `null`), softmax weights and context vectors, per head. Weights are
(queries × keys): row i is the token that attends, column j the token attended to.

Errors are 4xx JSON `{"detail": [{"loc": [...], "msg": "...", "type": "...", "ctx": {...}}]}`;
`loc` names the field, `msg` says it in words, `type` is a stable name of the rule
and `ctx` (when the rule has numbers) holds them: a size over a limit is
`limit_exceeded` with `ctx` `{"limit", "found", "setting"}` (`setting`: the
`ATTENTION_VIZ_*` environment variable that sets it, or `model_context`; see the
docs' Settings and limits page).
"""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # OpenMP's fork/join costs ~0.2-0.5 ms per op on small VMs, 100× a toy softmax:
    # one intra-op thread (inherited by the thread pool's threads) serves faster.
    torch.set_num_threads(app.state.settings.torch_threads)
    # The model's forward passes run on their own threads (app/model_work.py): one
    # fewer than the CPUs, so they neither starve the event loop nor multiply peak
    # memory; the pages and listings keep anyio's default pool to themselves, so they
    # never wait behind a model (bench/bench_mixed_load.py; app/compute.py).
    model_work.model_limiter().total_tokens = compute.MODEL_THREADS
    anyio.to_thread.current_default_thread_limiter().total_tokens = compute.PAGE_THREADS
    assets.warm_up()
    # Bounded memory under load (app/memory.py): before the thread pools allocate.
    memory.limit_arenas(app.state.settings.malloc_arena_max)
    trimmer = memory.start_trimmer(app.state.settings.malloc_trim_seconds)
    keep_freed_memory()
    app.state.models = build_registry(app.state.settings)  # reads nothing from disk
    yield
    if trimmer is not None:
        trimmer.stop()


# Pure functions of their body; the pages repeat the same preset requests.
CACHED_PATHS = frozenset({"/api/attention", "/api/compare"})


def _include_routes(app: FastAPI) -> None:
    for module in (
        health,
        api,
        models,
        model,
        model_stream,
        heads,
        why,
        generate,
        train,
        runs,
        assets,
        docs,
        pages,
        model_page,
        train_page,
    ):
        app.include_router(module.router)
    app.mount("/static", RevalidatedStaticFiles(directory=STATIC_DIR), name="static")


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """From the innermost out: the response cache, compression, the write timeout, the
    body cap and the request guard."""
    # Level 1: Starlette's default (9) spends 1-3 s on one 512-token compact attention layer
    # (5 MB of base64); level 1 takes ~50 ms and still shrinks it 8-16x.
    # Innermost, so that it stores uncompressed answers and never bypasses the body cap.
    app.add_middleware(
        ResponseCacheMiddleware,
        paths=CACHED_PATHS,
        cache=ResponseCache(settings.response_cache_entries, settings.response_cache_bytes),
    )
    app.add_middleware(GZipMiddleware, minimum_size=4096, compresslevel=1)
    # Outside the compression: a client that stops reading drops the answer it was sent.
    app.add_middleware(WriteTimeoutMiddleware, timeout=settings.write_timeout_seconds)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(
        RequestGuardMiddleware,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    check_device(settings.device)  # ATTENTION_VIZ_DEVICE=cuda without a GPU: refuse to start
    app = SecuredFastAPI(
        title="attention-viz",
        version=__version__,
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.openapi = with_integer_bounds(app.openapi)  # type: ignore[method-assign]
    app.state.settings = settings
    app.state.training_slots = slots_for(settings)

    async def current_settings() -> Settings:  # async: a sync one costs a thread-pool hop
        return settings

    app.dependency_overrides[get_settings] = current_settings
    install_error_handlers(app)
    _include_routes(app)
    _add_middleware(app, settings)
    return app


app = create_app()
