"""Builds the app: ``create_app()`` and nothing else happens at import time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware

from .errors import install_error_handlers
from .paths import STATIC_DIR
from .routes import api, assets, docs, health, pages
from .security import BodyLimitMiddleware, SecurityHeadersMiddleware
from .settings import Settings, get_settings

DESCRIPTION = """\
Self-attention, step by step. Every endpoint returns each intermediate tensor:
embeddings x, Q/K/V, raw scores, scaled scores, masked scores (masked entries
are `null`), softmax weights and context vectors, per head. Weights are
(queries × keys): row i is the token that attends, column j the token attended to.

Errors are 4xx JSON `{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`;
`loc` names the field and `msg` the limit. Limits are set by `ATTENTION_VIZ_*`
environment variables (see the README).
"""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    assets.warm_up()
    yield


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="attention-viz",
        version="0.1.0",
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.dependency_overrides[get_settings] = lambda: settings
    install_error_handlers(app)
    for module in (health, api, assets, docs, pages):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(GZipMiddleware, minimum_size=4096)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeadersMiddleware)
    return app
