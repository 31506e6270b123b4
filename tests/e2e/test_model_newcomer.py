"""/model as a newcomer meets it (issue 33's items on this page): "Sort by" reads before
the scores arrive; an old "Out of date" note goes when a new run starts."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, Route, expect

pytestmark = pytest.mark.e2e

WAIT = 60_000
MODEL = "tiny-bank-gpt"
TEXT = "Kim rowed the boat, then went to the bank"
SHOTS = os.environ.get("ATTENTION_VIZ_SCREENSHOTS")


def open_model(page: Page, text: str = TEXT) -> None:
    page.goto(f"/model?model={MODEL}&text={quote(text)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", str(2 * 6), timeout=WAIT
    )


def test_sort_by_lists_the_scores_before_they_are_asked_for(page: Page) -> None:
    open_model(page)
    card = page.get_by_test_id("heads-card")
    expect(card).to_have_attribute("data-drawn", "0")  # not scrolled into view: no scores yet
    sort = page.get_by_test_id("score-sort")
    expect(sort.locator("option")).to_have_count(5)
    expect(sort).to_have_value("previous_token")
    assert sort.evaluate("s => s.selectedOptions[0].textContent") == "previous token"


@pytest.mark.allow_console(r"422|Failed to load resource")
def test_a_new_run_clears_the_old_out_of_date_note(page: Page) -> None:
    open_model(page)
    note = page.get_by_test_id("stale-note")
    page.get_by_test_id("model-text").fill(" ".join(["bank"] * 80))  # past its 64 positions
    page.get_by_test_id("model-run").click()
    expect(note).to_be_visible(timeout=WAIT)
    expect(note).to_contain_text("Out of date")
    held: list[Route] = []
    page.route("**/api/model/attention/stream", lambda route: held.append(route))
    page.get_by_test_id("model-text").fill(TEXT)
    page.get_by_test_id("model-run").click()
    expect(page.get_by_test_id("model-progress")).to_be_visible()
    expect(note).to_be_hidden()  # while the new run is on its way
    for route in held:
        route.continue_()
    page.unroute("**/api/model/attention/stream")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", str(2 * 6), timeout=WAIT
    )
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / "model-rerun-1440.png"))
