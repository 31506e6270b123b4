"""Fixtures for the browser tests: the live uvicorn, headless Chromium, and a page
that fails its test on any console error, failed request or off-origin request.

Chromium is Debian's (``apt-get install chromium``); ``playwright install`` is not
needed. Set ``CHROMIUM_PATH`` to use another binary.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
VIEWPORT = {"width": 1280, "height": 900}

# Playwright's expect() waits 5 s unless told: a guess for a quiet machine.  The suite
# must pass at a load of 6 on 2 cores, where forward passes and a redraw can take tens of
# seconds, so every browser wait (expect() without a timeout of its own, and each module's
# WAIT, this constant imported) is bounded by this one figure: a test that passes returns
# as soon as its condition holds; only a failing one waits it out.  Only test_model_4k
# waits longer (forward passes at 4,096 tokens).
LOADED_WAIT = 60_000  # ms
expect.set_options(timeout=LOADED_WAIT)


# /model aborts a maps or generation job when a newer one starts (a newer text, model or
# task), at whatever moment the test asks again: by design, never a failure.  A job is its
# streamed first request and the plain POSTs for the other layers (model-worker.js), and
# cancelling it aborts all of them.  The why and attribution cards likewise abort their
# request when a newer cell or setting is asked for (model-why.js, model-attribution.js).
SUPERSEDED = re.compile(
    r"/api/model/(attention|generate|why|attribute)(/stream)? \(net::ERR_ABORTED\)$"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "allow_console(pattern): console errors, HTTP statuses and failed requests matching "
        "this regex are expected (e.g. a 422, an aborted fetch)",
    )


@pytest.fixture(scope="session")
def server_url(live_server: str) -> str:
    """The shared uvicorn (tests/conftest.py's ``live_server``: ``create_app()`` on a free port)."""
    return live_server


def _same_origin(url: str, origin: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    return f"{parts.scheme}://{parts.netloc}" == origin


@pytest.fixture
def page(browser: Browser, server_url: str, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh context and page; at teardown a screenshot is saved and the page's
    console errors, page errors, failed requests and off-origin requests are asserted empty."""
    marker = request.node.get_closest_marker("allow_console")
    allowed = re.compile(marker.args[0]) if marker else None
    context = browser.new_context(viewport=VIEWPORT, base_url=server_url, accept_downloads=True)
    page = context.new_page()
    problems: list[str] = []

    def on_console(msg: Any) -> None:
        if msg.type == "error" and not (allowed and allowed.search(msg.text)):
            problems.append(f"console error: {msg.text} @ {msg.location.get('url', '')}")

    def on_response(response: Any) -> None:
        if response.status >= 400 and not (allowed and allowed.search(str(response.status))):
            problems.append(f"HTTP {response.status}: {response.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda err: problems.append(f"page error: {err}"))

    def on_request_failed(request: Any) -> None:
        message = f"request failed: {request.url} ({request.failure})"
        if SUPERSEDED.search(message):
            return
        if not (allowed and allowed.search(message)):  # e.g. a fetch the page aborts on purpose
            problems.append(message)

    page.on("requestfailed", on_request_failed)
    page.on("response", on_response)
    page.on(
        "request",
        lambda r: (
            None
            if _same_origin(r.url, server_url)
            else problems.append(f"off-origin request: {r.url}")
        ),
    )
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    try:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        found = list(problems)  # closing the context aborts what is still in flight
    finally:
        context.close()
    assert not found, "\n".join(found)


# ---------- helpers shared by the tests ----------


@contextmanager
def watched_page(browser: Browser, base_url: str, **options: Any) -> Iterator[Page]:
    """A page of a new context on ``base_url`` (``options``: the context's) that fails its
    test on any page or console error."""
    context = browser.new_context(base_url=base_url, **options)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        yield page
        found = list(errors)  # closing the context aborts what is still in flight
    finally:
        context.close()
    assert not found, found


@pytest.fixture
def narrow(browser: Browser, server_url: str) -> Iterator[Page]:
    """A 390 px phone-sized page (2x pixels) that fails its test on any page or console error."""
    viewport = {"width": 390, "height": 844}
    with watched_page(browser, server_url, viewport=viewport, device_scale_factor=2) as page:
        yield page


def api(server_url: str, path: str, body: dict | None = None) -> Any:
    """Call the JSON API from Python (GET, or POST when a body is given)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"{server_url}{path}",
        data=data,
        headers={"content-type": "application/json"} if data else {},
        method="POST" if data else "GET",
    )
    with urllib.request.urlopen(req, timeout=30) as response:
        return json.load(response)


def plot_data(page: Page, testid: str, trace: int = 0, field: str = "z") -> Any:
    """What Plotly is drawing: ``div.data[trace][field]`` of the plot with this test id."""
    return page.evaluate(
        "([id, t, f]) => { const d = document.querySelector(`[data-testid='${id}']`);"
        " return d && d.data ? d.data[t][f] : null; }",
        [testid, trace, field],
    )


def wait_for_plot(page: Page, testid: str) -> None:
    page.wait_for_function(
        "id => { const d = document.querySelector(`[data-testid='${id}']`);"
        " return d && d.data && d.data.length > 0; }",
        arg=testid,
    )


def tick_texts(page: Page, testid: str, axis: str = "x") -> list[str]:
    return page.eval_on_selector_all(
        f"[data-testid='{testid}'] .{axis}tick text", "els => els.map(e => e.textContent)"
    )


def assert_matrix_close(actual: Any, expected: Any, tol: float = 1e-6) -> None:
    assert actual is not None, "the plot has no data"
    assert len(actual) == len(expected), (len(actual), len(expected))
    for i, (row_a, row_e) in enumerate(zip(actual, expected, strict=True)):
        assert len(row_a) == len(row_e), f"row {i}: {len(row_a)} vs {len(row_e)} columns"
        for j, (a, e) in enumerate(zip(row_a, row_e, strict=True)):
            if e is None or a is None:
                assert a is None and e is None, f"[{i}][{j}]: {a!r} vs {e!r}"
            else:
                assert abs(a - e) <= tol, f"[{i}][{j}]: {a} vs {e}"
