"""Pages word each error from its ``type`` and ``ctx``, never from its sentence: every
``msg`` the server sends here is replaced by nonsense, and the page still says, beside
the right control, what went wrong and the numbers of the limit."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT

pytestmark = pytest.mark.e2e

NONSENSE = "zz-not-a-sentence"


def scramble_messages(page: Page, pattern: str, edit_request: Any = None) -> list[dict]:
    """Route ``pattern`` to the server, then replace every error's msg by NONSENSE.

    Returns the list the error items are appended to (as the server sent them)."""
    seen: list[dict] = []

    def handle(route: Route) -> None:
        post = route.request.post_data
        if edit_request is not None and post:
            post = json.dumps(edit_request(json.loads(post)))
        response = route.fetch(post_data=post) if post else route.fetch()
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            # A streamed request's error is its `error` event: scramble that one's items.
            route.fulfill(response=response, body=scrambled_events(response.text(), seen))
            return
        if response.status < 400:
            route.fulfill(response=response)
            return
        body = response.json()
        scramble(body, seen)
        route.fulfill(response=response, json=body)

    page.route(pattern, handle)
    return seen


def scramble(body: dict, seen: list[dict]) -> None:
    """Each error item of ``body`` kept in ``seen`` as sent, its ``msg`` made NONSENSE."""
    for item in body["detail"]:
        seen.append(dict(item))
        item["msg"] = NONSENSE


def scrambled_events(stream: str, seen: list[dict]) -> str:
    """An event stream with its ``error`` event's messages scrambled (``scramble``)."""
    frames = []
    for frame in stream.split("\n\n"):
        lines = frame.split("\n")
        if "event: error" in lines:
            at = next(i for i, line in enumerate(lines) if line.startswith("data: "))
            body = json.loads(lines[at].removeprefix("data: "))
            scramble(body, seen)
            lines[at] = "data: " + json.dumps(body)
        frames.append("\n".join(lines))
    return "\n\n".join(frames)


def assert_no_nonsense(page: Page) -> None:
    assert NONSENSE not in page.locator("main").inner_text()


@pytest.mark.allow_console(r"status of 422|^422$")
def test_a_pydantic_bound_is_worded_from_ctx(page: Page) -> None:
    page.goto("/?preset=next-day-rand")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))

    def negative_seed(body: dict) -> dict:
        body["projection"]["seed"] = -5
        return body

    seen = scramble_messages(page, "**/api/attention", negative_seed)
    page.get_by_label("Causal mask (no looking ahead)").click()
    expect(page.get_by_test_id("error-proj_seed")).to_have_text(
        "Projection seed must be at least 0."
    )
    assert seen and seen[0]["type"] == "greater_than_equal" and seen[0]["ctx"] == {"ge": 0}
    assert_no_nonsense(page)


@pytest.mark.model
@pytest.mark.allow_console(r"status of 422|^422$")
def test_a_text_over_the_models_context_is_worded_from_ctx(page: Page) -> None:
    page.goto("/model")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", re.compile(r"\d+"), timeout=WAIT
    )
    seen = scramble_messages(page, "**/api/model/attention**")  # the POST and its stream
    page.get_by_test_id("model-text").fill(" ".join(["word"] * 520))
    page.get_by_test_id("model-run").click()
    error = page.get_by_test_id("error-text")
    expect(error).to_have_text(
        "Text is 522 WordPiece tokens (with [CLS] and [SEP]); this model reads at most 512 "
        "(its context). Shorten it.",
        timeout=WAIT,
    )
    assert seen[0]["type"] == "limit_exceeded"
    assert seen[0]["ctx"]["limit"] == 512 and seen[0]["ctx"]["found"] == 522
    expect(page.get_by_test_id("model-text")).to_have_attribute("aria-invalid", "true")
    assert_no_nonsense(page)


@pytest.mark.model
@pytest.mark.allow_console(r"status of 404|^404$")
def test_an_unknown_model_is_named_from_ctx(page: Page) -> None:
    page.goto("/model")
    expect(page.get_by_test_id("cw-row")).to_have_count(7, timeout=WAIT)

    def other_model(body: dict) -> dict:
        return {**body, "model": "no-such-model"}

    seen = scramble_messages(page, "**/api/model/attention", other_model)
    page.get_by_test_id("model-text").fill("the river bank")
    page.get_by_test_id("model-run").click()
    expect(page.get_by_test_id("error-model")).to_have_text(
        "There is no model called “no-such-model” on this server. Choose one from the list.",
        timeout=WAIT,
    )
    assert (seen[0]["type"], seen[0]["ctx"]) == ("model_not_found", {"name": "no-such-model"})
    assert_no_nonsense(page)
