"""Issue 32 items 1-2: pages and listings never wait behind a model; a plain model POST
stops when its client leaves or its deadline passes, and the line of model work is bounded.

uvicorn in a thread of this process (as tests/api/test_model_stream.py), one model thread,
a random GPT-2 whose block 1 is held by a forward hook until the server cancels the pass
(``tests/progress_hold.py``): every wait is on a state of the server, never a sleep.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest

from devtools.server import serve_in_thread
from tests.models.checkpoints import make_gpt2
from tests.progress_hold import held
from tests.requires import require

NAME = "fair-gpt2"
LAYERS = 4
TEXT = "The bank approved the loan."
PAGES = ["/", "/compare", "/lessons", "/train", "/model", "/api/models", "/api/runs"]
# Far below the hold (30 s): a page that queues behind the held model thread times out.
PAGE_TIMEOUT = 5


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """(base URL, app): one random GPT-2, one model thread, a line of one."""
    require("transformers")
    from app import compute
    from app.main import create_app
    from app.settings import Settings

    root = tmp_path_factory.mktemp("fair-models")
    make_gpt2(root / NAME, n_layer=LAYERS, n_positions=64)
    runs = tmp_path_factory.mktemp("fair-runs")
    settings = Settings(models=str(root), hf_cache=False, runs_dir=str(runs), model_queue=1)
    app = create_app(settings)
    threads, compute.MODEL_THREADS = compute.MODEL_THREADS, 1  # read by the app's lifespan
    try:
        with serve_in_thread(app) as url:
            assert httpx.get(f"{url}/api/model", params={"model": NAME}, timeout=60).is_success
            yield url, app
    finally:
        compute.MODEL_THREADS = threads


def until(condition: Callable[[], bool]) -> None:
    """Poll a state of the server (never a sleep standing for one); 30 s at the most."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the state"
        time.sleep(0.01)


def open_post(url: str, path: str, body: dict[str, Any]) -> socket.socket:
    """A plain POST sent on a raw socket, its answer not read: close it to leave."""
    host, port = url.removeprefix("http://").split(":")
    data = orjson.dumps(body)
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def read_answer(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
        if b"\r\n\r\n" in b"".join(chunks):
            break
    return b"".join(chunks)


def body(text: str) -> dict[str, Any]:
    return {"model": NAME, "text": text, "format": "compact"}


def test_pages_and_listings_answer_while_every_model_thread_is_held(served) -> None:
    url, app = served
    with held(app.state.models.load(NAME), layer=1) as seen:
        sock = open_post(url, "/api/model/attention", body("Held while the pages answer."))
        try:
            until(lambda: seen["held"] == 1)
            with httpx.Client(base_url=url, timeout=PAGE_TIMEOUT) as client:
                for path in PAGES:
                    assert client.get(path).status_code == 200, path
                info = client.get("/api/model", params={"model": NAME})
                assert info.status_code == 200 and info.json()["name"] == NAME
            assert seen["cancelled"] == 0  # all answered while the model thread was held
        finally:
            sock.close()
        until(lambda: seen["cancelled"] == 1)


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/api/model/attention", {"format": "compact"}),
        ("/api/model/head-scores", {}),
        ("/api/model/ablate", {"each_head": True}),
        ("/api/model/logit-lens", {}),
    ],
)
def test_a_closed_plain_post_stops_its_work_within_one_layer(served, path, extra) -> None:
    url, app = served
    text = f"Closed before its answer: {path}."
    with held(app.state.models.load(NAME), layer=1) as seen:
        sock = open_post(url, path, {"model": NAME, "text": text, **extra})
        until(lambda: seen["held"] == 1)
        sock.close()
        until(lambda: seen["cancelled"] == 1)
        # The pass stopped in block 1; the thread is free: the next request runs at once.
        after = httpx.post(
            f"{url}/api/model/attention", json=body(f"Next after {path}."), timeout=30
        )
    assert after.status_code == 200
    assert seen["last_block"] == 1  # the next request's pass only: the held one never got there


def test_a_full_line_is_refused_with_429_and_retry_after(served) -> None:
    url, app = served
    with held(app.state.models.load(NAME), layer=1) as seen:
        running = open_post(url, "/api/model/attention", body("Running, held."))
        until(lambda: seen["held"] == 1)
        waiting = open_post(url, "/api/model/attention", body("Waiting in line."))
        try:
            until(lambda: seen["waiting"] == 1)  # the line (of one) is full
            for path, payload in (
                ("/api/model/attention", body("One too many.")),
                ("/api/model/attention/stream", body("One too many.")),
                ("/api/model/head-scores", {"model": NAME, "text": "One too many."}),
            ):
                refused = httpx.post(f"{url}{path}", json=payload, timeout=PAGE_TIMEOUT)
                assert refused.status_code == 429, path
                assert refused.headers["retry-after"] == "5"
                assert refused.headers["x-content-type-options"] == "nosniff"
                (error,) = refused.json()["detail"]
                assert error["type"] == "queue_full"
                assert error["ctx"] == {
                    "limit": 1,
                    "found": 1,
                    "setting": "ATTENTION_VIZ_MODEL_QUEUE",
                }
        finally:
            running.close()
        answer = read_answer(waiting)  # the one in line runs once the held pass stopped
        waiting.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


@contextmanager
def deadline(app: Any, seconds: float) -> Iterator[None]:
    """The served app's model deadline set to ``seconds`` for the block."""
    settings = app.state.settings
    app.state.settings = settings.model_copy(update={"model_deadline_seconds": seconds})
    try:
        yield
    finally:
        app.state.settings = settings


def test_a_deadline_stops_the_work_and_frees_its_thread(served) -> None:
    url, app = served
    with deadline(app, 0.5), held(app.state.models.load(NAME), layer=1) as seen:
        late = httpx.post(f"{url}/api/model/attention", json=body("Too slow."), timeout=30)
        assert seen["cancelled"] == 1  # the deadline let the hold go, not its own limit
    assert late.status_code == 503
    (error,) = late.json()["detail"]
    assert error["type"] == "deadline_exceeded"
    assert error["ctx"] == {"limit": 0.5, "setting": "ATTENTION_VIZ_MODEL_DEADLINE_SECONDS"}
    after = httpx.post(f"{url}/api/model/attention", json=body("In time."), timeout=30)
    assert after.status_code == 200  # the thread was given back
    assert seen["last_block"] == 0


def test_a_streamed_request_past_its_deadline_ends_with_an_error_event(served) -> None:
    url, app = served
    with deadline(app, 0.5), held(app.state.models.load(NAME), layer=1) as seen:
        streamed = httpx.post(
            f"{url}/api/model/attention/stream", json=body("Too slow, streamed."), timeout=30
        )
    assert seen["cancelled"] == 1
    last = streamed.text.strip().split("\n\n")[-1]
    assert last.startswith("event: error\n")
    data = orjson.loads(last.split("data: ", 1)[1])
    assert data["status"] == 503 and data["detail"][0]["type"] == "deadline_exceeded"
