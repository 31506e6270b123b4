"""Issue 20 items 9-10: cheap requests never wait for the model work's threads, and the
allocator is bounded (arenas, periodic trim).  The figures are in bench/bench_mixed_load.py."""

from __future__ import annotations

import threading
import time

from fastapi import Request, Response
from fastapi.testclient import TestClient

from app import compute, memory
from app.main import create_app
from app.model_work import model_answer, model_limiter
from app.settings import Settings

# 64 tokens × 64 wide: 64³ multiply-adds, above INLINE_WORK, so it runs on a thread.
BIG_TOY = {
    "tokens": [f"t{i}" for i in range(64)],
    "embedding": {"kind": "hashed", "dim": 64, "seed": 0},
}


def test_toy_work_runs_while_every_model_thread_is_busy() -> None:
    assert 64**3 > compute.INLINE_WORK
    app = create_app(Settings(response_cache_entries=0))
    release = threading.Event()
    entered = threading.Semaphore(0)

    @app.post("/test/hold-a-model-thread")
    async def hold(request: Request) -> Response:  # where the model routes run
        def held(_: object) -> Response:
            entered.release()
            release.wait(30)
            return Response()

        return await model_answer(request, held)

    with TestClient(app) as client:
        limiter = client.portal.call(model_limiter)  # type: ignore[union-attr]
        assert limiter.total_tokens == compute.MODEL_THREADS
        holders = [
            threading.Thread(target=client.post, args=("/test/hold-a-model-thread",))
            for _ in range(compute.MODEL_THREADS)
        ]
        for holder in holders:
            holder.start()
        try:
            for _ in holders:
                assert entered.acquire(timeout=10)
            assert limiter.borrowed_tokens == limiter.total_tokens  # the model pool is full
            start = time.monotonic()
            response = client.post("/api/attention", json=BIG_TOY)
            waited = time.monotonic() - start
            assert response.status_code == 200, response.text
            assert len(response.json()["tokens"]) == 64
            assert waited < 10 and not release.is_set()
        finally:
            release.set()
            for holder in holders:
                holder.join(10)


def trimmers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "attention-viz-malloc-trim"]


def test_the_lifespan_bounds_the_allocator() -> None:
    # Other apps' trimmers (servers of other test modules) may stop meanwhile: this app's
    # own are the ones not running before it.
    before = set(trimmers())
    with TestClient(create_app(Settings(malloc_trim_seconds=0.05))):
        (own,) = [t for t in trimmers() if t not in before]
        time.sleep(0.2)
    assert not own.is_alive()  # stopped and joined with the app's lifespan
    before = set(trimmers())
    with TestClient(create_app(Settings(malloc_trim_seconds=0, malloc_arena_max=0))):
        assert not [t for t in trimmers() if t not in before]
    assert memory.limit_arenas(2) is True  # glibc (the CI image is Debian)
    assert memory.limit_arenas(0) is False
    assert isinstance(memory.trim(), bool)
