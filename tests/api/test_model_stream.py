"""POST /api/model/attention/stream and /generate/stream over real HTTP (uvicorn in a thread
of this process, so a test can hook the server's model): progress per layer in order, then
the plain POST's body; the POST's errors as an ``error`` event; a closed connection stops
the pass before its last layer, frees the one model thread and caches nothing; a request
that waits for the thread is told it is queued.

The slow request is slow deterministically: a forward hook holds one layer until the
server cancels the pass (``tests/progress_hold.py``; never a sleep racing the server).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from devtools.server import serve_in_thread
from tests.models.checkpoints import make_gpt2
from tests.progress_hold import held
from tests.requires import require

NAME = "stream-gpt2"
LAYERS = 5
TEXT = "The bank approved the loan, and the river bank was muddy."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """(base URL, app) of a uvicorn thread serving one random GPT-2 with one model thread."""
    require("transformers")
    from app import compute
    from app.main import create_app
    from app.settings import Settings

    root = tmp_path_factory.mktemp("stream-models")
    make_gpt2(root / NAME, n_layer=LAYERS, n_positions=64)
    app = create_app(Settings(models=str(root), hf_cache=False))
    threads, compute.MODEL_THREADS = compute.MODEL_THREADS, 1  # read by the app's lifespan
    try:
        with serve_in_thread(app) as url:
            yield url, app
    finally:
        compute.MODEL_THREADS = threads


def events(response: httpx.Response) -> Iterator[tuple[str, bytes]]:
    """(event, raw data) of each SSE message as it arrives."""
    name = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, line.removeprefix("data: ").encode()


def stream(url: str, path: str, body: dict[str, Any]) -> list[tuple[str, bytes]]:
    with httpx.Client(base_url=url, timeout=60) as client:
        with client.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            return list(events(response))


def progress(messages: list[tuple[str, bytes]]) -> list[tuple[str, int, int]]:
    found = [orjson.loads(data) for name, data in messages if name == "progress"]
    return [(p["stage"], p["done"], p["total"]) for p in found]


def forward(total: int) -> list[tuple[str, int, int]]:
    return [("forward", n, total) for n in range(1, total + 1)]


def test_progress_per_layer_then_exactly_the_posts_body(server) -> None:
    url, _ = server
    body = {"model": NAME, "text": TEXT, "format": "compact"}
    messages = stream(url, "/api/model/attention/stream", body)
    # The model's first request also reads its weights in (``load``: its layers, then the rest).
    loading = [m for m in messages if m[0] == "progress" and b'"stage":"load"' in m[1]]
    assert progress(loading) in ([], [("load", n, LAYERS + 1) for n in range(1, LAYERS + 2)])
    messages = [m for m in messages if m not in loading]
    assert [name for name, _ in messages] == ["progress"] * LAYERS + ["result"]
    assert progress(messages) == forward(LAYERS)
    first = orjson.loads(messages[0][1])
    assert first["eta_s"] is not None and first["elapsed_s"] >= 0
    assert orjson.loads(messages[-2][1])["eta_s"] == 0
    posted = httpx.post(f"{url}/api/model/attention", json=body, timeout=60)
    assert posted.status_code == 200
    assert messages[-1][1] == posted.content  # the very bytes
    # Every message is one the OpenAPI document describes.
    from app.schemas.model_events import AttentionStreamMessage

    for name, data in messages:
        AttentionStreamMessage.model_validate({"event": name, "data": orjson.loads(data)})


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"model": "no-such-model", "text": TEXT}, 404),
        ({"model": NAME, "text": "bank " * 80}, 422),  # past the model's 64 positions
        ({"model": NAME, "text": TEXT, "layers": [LAYERS + 1]}, 422),
    ],
)
def test_an_error_is_the_posts_error_as_an_event(server, body, status: int) -> None:
    url, _ = server
    messages = stream(url, "/api/model/attention/stream", body)
    (name, data), *_ = [m for m in messages if m[0] != "progress"]
    assert name == "error" and messages[-1][0] == "error"
    posted = httpx.post(f"{url}/api/model/attention", json=body, timeout=60)
    assert posted.status_code == status
    assert orjson.loads(data) == {"status": status, **posted.json()}


def test_a_body_that_fails_validation_gets_the_posts_422(server) -> None:
    url, _ = server
    body = {"model": NAME, "text": ""}
    streamed, posted = (
        httpx.post(f"{url}/api/model/attention{path}", json=body, timeout=60)
        for path in ("/stream", "")
    )
    assert streamed.status_code == posted.status_code == 422
    assert streamed.headers["content-type"] == "application/json"
    assert streamed.content == posted.content


def test_a_closed_connection_stops_the_pass_and_a_waiting_request_is_queued(server) -> None:
    url, app = server
    httpx.get(f"{url}/api/model", params={"model": NAME}, timeout=60)  # load it
    text = "A text of this test only, never cached before."
    body = {"model": NAME, "text": text, "format": "compact"}
    with (
        held(app.state.models.load(NAME), layer=1) as seen,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        with client.stream("POST", "/api/model/attention/stream", json=body) as first:
            received = events(first)  # kept: a dropped iterator would close the response
            name, data = next(received)
            assert (name, orjson.loads(data)["done"]) == ("progress", 1)  # block 1 holds it now
            # The one model thread is busy with the held pass: a second request waits.
            with httpx.Client(base_url=url, timeout=60) as other:
                other_body = {"model": NAME, "text": TEXT + " (second)", "format": "compact"}
                with other.stream("POST", "/api/model/attention/stream", json=other_body) as r:
                    waiting = events(r)
                    name, data = next(waiting)
                    assert name == "progress"
                    assert orjson.loads(data)["stage"] == "queued"
                    first.close()  # the page aborts its older request
                    rest = list(waiting)
    # The held pass stopped before its last layer; the second ran all of them.
    assert seen["held"] == 1 and seen["cancelled"] == 1
    assert seen["last_block"] == 1  # the second request's pass only
    assert progress(rest) == forward(LAYERS)
    assert rest[-1][0] == "result"
    # Nothing of the cancelled pass was cached: the same text runs every layer again.
    again = stream(url, "/api/model/attention/stream", body)
    assert progress(again) == forward(LAYERS)
    posted = httpx.post(f"{url}/api/model/attention", json=body, timeout=60)
    assert again[-1] == ("result", posted.content)


def until(condition: Callable[[], bool]) -> None:
    """Poll a state of the server (never a sleep standing for one); 30 s at the most."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the state"
        time.sleep(0.01)


def test_a_request_that_leaves_while_waiting_for_the_thread_never_runs(server) -> None:
    url, app = server
    httpx.get(f"{url}/api/model", params={"model": NAME}, timeout=60)  # load it
    first_body = {"model": NAME, "text": "Held until the end of this test.", "format": "compact"}
    waiting_body = {"model": NAME, "text": "Never computed: it left.", "format": "compact"}
    with (
        held(app.state.models.load(NAME), layer=1) as seen,
        httpx.Client(base_url=url, timeout=60) as client,
        httpx.Client(base_url=url, timeout=60) as other,
    ):
        with client.stream("POST", "/api/model/attention/stream", json=first_body) as first:
            received = events(first)
            assert next(received)[0] == "progress"  # block 1 holds the one model thread
            with other.stream("POST", "/api/model/attention/stream", json=waiting_body) as r:
                waiting = events(r)
                name, data = next(waiting)
                assert orjson.loads(data)["stage"] == "queued"
                # It waits for the thread (the held thread asks the server's event loop).
                until(lambda: seen["waiting"] == 1)
            # It left: the server no longer keeps it in line.  Then the held request is
            # let go (leaving this block closes it).
            until(lambda: seen["waiting"] == 0)
        # A request after both: the thread serves it once the held pass has stopped.
        posted = client.post("/api/model/attention", json={**first_body, "text": "After."})
        assert posted.status_code == 200
    assert seen["cancelled"] == 1
    assert seen["first_block"] == 2  # the held pass and the last POST's: none for the one that left
    assert seen["last_block"] == 1  # the last POST's


def test_generation_streams_the_prompts_layers_then_each_token(server) -> None:
    url, _ = server
    body = {"model": NAME, "prompt": "The bank", "max_new_tokens": 3, "format": "compact"}
    messages = stream(url, "/api/model/generate/stream", body)
    posted = httpx.post(f"{url}/api/model/generate", json=body, timeout=60)
    assert posted.status_code == 200
    written = len(posted.json()["generated_ids"])
    # The prompt's layers, each token written, then the maps' pass over all of them.
    assert progress(messages) == forward(LAYERS) + [
        ("generate", n, 3) for n in range(1, written + 1)
    ] + forward(LAYERS)
    assert messages[-1] == ("result", posted.content)


def test_the_streams_are_in_the_openapi_document(server) -> None:
    url, _ = server
    paths = httpx.get(f"{url}/openapi.json", timeout=30).json()["paths"]
    for path, message in (
        ("/api/model/attention/stream", "AttentionStreamMessage"),
        ("/api/model/generate/stream", "GenerateStreamMessage"),
    ):
        ok = paths[path]["post"]["responses"]["200"]["content"]["text/event-stream"]
        assert ok["schema"] == {"$ref": f"#/components/schemas/{message}"}


def test_a_long_input_streams_its_layers_then_the_maps_built(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Past the full-maps budget (every input here) the stream is the POST's too: the
    forward's layers (the maps are gathered inside the pass), then its body."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    root = tmp_path_factory.mktemp("long-stream")
    make_gpt2(root / NAME, n_layer=LAYERS, n_positions=64)
    settings = Settings(models=str(root), hf_cache=False, model_full_maps_bytes=0)
    body = {"model": NAME, "text": TEXT, "format": "compact", "pool": 4, "layers": [2, 3]}
    with TestClient(create_app(settings)) as client:
        answer = client.post("/api/model/attention/stream", json=body)
        posted = client.post("/api/model/attention", json=body)
    messages = [
        (lines[0].removeprefix("event: "), lines[1].removeprefix("data: ").encode())
        for lines in (m.split("\n") for m in answer.text.strip().split("\n\n"))
    ]
    loading = [("load", n, LAYERS + 1) for n in range(1, LAYERS + 2)]  # the first request
    assert progress(messages) == loading + forward(LAYERS)
    assert posted.json()["maps_path"] == "long"
    assert messages[-1] == ("result", posted.content)
