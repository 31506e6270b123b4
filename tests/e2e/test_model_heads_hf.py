"""/model's head panels on a transformers-backed decoder (a tiny random Gemma 2: GQA, a
sliding window, soft-capped logits): the score grid loads by itself once scrolled into view
and equals the API's; ablating a head shows the API's loss change; 1440 and 390 px."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.head_cards import ablate_one_head, scores_are_the_apis
from tests.e2e.servers import models_server
from tests.models.hf_checkpoints import make_hf
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

MODEL = "tiny-gemma2"
TEXT = "The bank approved the loan, and the river bank was muddy."
SHOTS = os.environ.get("ATTENTION_VIZ_SCREENSHOTS")  # a directory: screenshots to look at


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require("transformers")
    root = tmp_path_factory.mktemp("hf-heads-models")
    make_hf(root / MODEL, MODEL)
    with models_server(root) as url:
        yield url


def open_model(page: Page) -> None:
    page.goto(f"/model?model={MODEL}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", str(2 * 6), timeout=WAIT
    )


@pytest.mark.parametrize("width", [1440, 390])
def test_scores_load_in_view_and_ablating_a_head_shows_the_change(
    page: Page, server_url: str, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    open_model(page)
    card = page.get_by_test_id("heads-card")
    expect(card).to_have_attribute("data-drawn", "0")
    card.scroll_into_view_if_needed()  # no click: coming into view asks for the scores
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
    expect(page.get_by_test_id("score-grid").locator(".hg-cell")).to_have_count(2 * 4)
    body = {"model": MODEL, "text": TEXT, "seed": 0}
    scores_are_the_apis(page, server_url, body, [(1, 1), (2, 4)])

    body = {"model": MODEL, "text": TEXT, "heads": [[1, 2]]}
    answer = ablate_one_head(page, server_url, body, WAIT)
    assert abs(answer["loss_after"] - answer["loss_before"]) > 1e-3
    expect(page.get_by_test_id("ablate-row")).to_have_count(len(answer["tokens"]))
    changed = sum(
        before["top_ids"][0] != after["top_ids"][0]
        for before, after in zip(
            answer["predictions_before"], answer["predictions_after"], strict=True
        )
    )
    expect(page.locator("[data-testid=ablate-row][data-changed='1']")).to_have_count(changed)
    page.get_by_test_id("lens-run").click()
    expect(page.get_by_test_id("lens-row")).to_have_count(2, timeout=WAIT)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"model-heads-gemma2-{width}.png"), full_page=True)


def delivered(page: Page, condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` holds: it reads what Playwright's events (a routed request,
    a failed one) have delivered, which happens only while a Playwright call runs, however
    late a loaded machine makes them (never one check right after the action)."""
    deadline = time.monotonic() + WAIT / 1000
    while not condition():
        assert time.monotonic() < deadline, "the browser's event never came"
        page.wait_for_timeout(20)  # a Playwright call: it delivers the pending events


@pytest.mark.allow_console(r"head-scores \(net::ERR_ABORTED\)")
def test_new_maps_abort_a_pending_score_request(page: Page) -> None:
    """The first text's scores are held back by the test; a new text is shown meanwhile:
    that request is aborted, and the new text's scores are the ones drawn."""
    held: list[object] = []
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))

    def hold_first(route: object) -> None:
        if not held:
            held.append(route)  # never answered: only an abort ends it
        else:
            route.continue_()  # type: ignore[attr-defined]

    page.route("**/api/model/head-scores", hold_first)
    open_model(page)
    page.get_by_test_id("heads-card").scroll_into_view_if_needed()
    expect(page.get_by_test_id("scores-status")).to_have_text("Scoring every head…", timeout=WAIT)
    delivered(page, lambda: len(held) == 1)  # the status is set before the request is routed
    page.get_by_test_id("model-text").fill("the river bank")
    page.get_by_test_id("model-run").click()
    expect(page.get_by_test_id("scores-status")).to_have_text("", timeout=WAIT)  # new maps shown
    page.get_by_test_id("heads-card").scroll_into_view_if_needed()
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    delivered(page, lambda: any("head-scores" in f and "ABORTED" in f for f in failed))
    expect(page.get_by_test_id("scores-error")).to_have_text("")
    expect(page.get_by_test_id("score-row")).to_have_count(8)
    assert len(held) == 1 and "the river bank" in page.get_by_test_id("model-text").input_value()
