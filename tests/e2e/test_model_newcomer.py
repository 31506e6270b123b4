"""/model as a newcomer meets it (issue 33's items on this page): "Sort by" reads before
the scores arrive; an old "Out of date" note goes when a new run starts."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, Route, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT

pytestmark = pytest.mark.e2e

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


LONG = "Kim rowed the boat, then went to the bank. Kim rowed the"  # 56 characters, 56 tokens


def choose_token(page: Page, index: int) -> None:
    page.get_by_test_id("wp-token").nth(index).click()
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-query", str(index))


@pytest.mark.parametrize("width", [1440, 390])
def test_the_lines_box_opens_on_the_chosen_token(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    open_model(page, LONG)
    choose_token(page, 40)
    figure = page.get_by_test_id("headview-figure")
    chosen = figure.locator(".hv-query.chosen")
    expect(chosen).to_have_attribute("data-index", "40")
    assert figure.evaluate("f => f.scrollHeight > f.clientHeight")  # a box that scrolls
    inside = figure.evaluate(
        """f => { const b = f.getBoundingClientRect();
                 const c = f.querySelector('.hv-query.chosen').getBoundingClientRect();
                 return c.top >= b.top && c.bottom <= b.bottom; }"""
    )
    assert inside, "the chosen token is scrolled out of the lines box"
    # One numbering: the words count from 0, as the labels' ·n do.
    expect(page.get_by_test_id("tv-what")).to_contain_text("at position 40 (of 56 tokens")
    expect(page.get_by_test_id("tv-what")).not_to_contain_text("token 41")
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"model-token-view-{width}.png"), full_page=True)


def test_small_weights_keep_two_significant_digits(page: Page) -> None:
    """A 250-key row of 0.004 each: the summary says 0.0040, not 0.00."""
    open_model(page)
    summary = page.evaluate(
        """async () => {
            const { drawHeadView } = await import('/static/js/headview.js');
            const box = document.createElement('div');
            document.querySelector('main').append(box);
            const keys = Array.from({ length: 250 }, (_, j) => `k${j}`);
            drawHeadView(box, { queries: ['q'], keys, query: 0, rows: [keys.map(() => 0.004)] });
            return box.querySelector('.hv-summary').textContent;
        }"""
    )
    assert "0.0040" in summary and " 0.00;" not in summary and not summary.endswith(" 0.00")


def test_the_logit_lens_has_a_colour_bar(page: Page) -> None:
    open_model(page)
    page.get_by_test_id("lens-run").click()
    expect(page.get_by_test_id("lens-row")).to_have_count(2, timeout=WAIT)
    bar = page.get_by_test_id("lens-colour-bar")
    expect(bar).to_be_visible()
    expect(bar).to_have_attribute("data-scale", "linear")
    expect(bar).to_have_attribute("data-zmax", "1")
    expect(bar).to_contain_text("probability of the top token (linear scale)")


@pytest.mark.model
@pytest.mark.parametrize("width", [1440, 390])
def test_the_long_text_canvas_has_axes_a_colour_bar_and_keeps_a_region_s_shape(
    page: Page, width: int
) -> None:
    from tests.e2e.test_model_page import words

    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/model?text={quote(words(200))}")
    ready = page.get_by_test_id("canvas-zoom")
    expect(ready).to_have_attribute("data-ready", re.compile(r"^1-1:0,\d+:0,\d+$"), timeout=WAIT)
    axes = page.get_by_test_id("zoom-axes")
    expect(axes).to_contain_text("attends (query)")
    expect(axes).to_contain_text("attended to (key)")
    bar = page.get_by_test_id("zoom-colour-bar")
    expect(bar).to_have_attribute("data-scale", "linear")
    assert 0 < float(bar.get_attribute("data-zmax") or "nan") <= 1
    page.get_by_test_id("colour-scale").select_option("log")
    expect(bar).to_have_attribute("data-scale", "log")
    expect(bar).to_contain_text("log scale, 4 powers of ten")
    # A 100 × 150 region is drawn 1.5 times as wide as tall, not stretched square.
    for name, value in [("row0", 0), ("row1", 100), ("col0", 0), ("col1", 150)]:
        page.get_by_test_id(f"zoom-{name}").fill(str(value))
    page.get_by_test_id("zoom-apply").click()
    expect(ready).to_have_attribute("data-ready", "1-1:0,100:0,150", timeout=WAIT)
    w, h = page.get_by_test_id("zoom-canvas").evaluate(
        "c => [c.getBoundingClientRect().width, c.getBoundingClientRect().height]"
    )
    assert w / h == pytest.approx(1.5, rel=0.02)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    if SHOTS:
        ready.screenshot(path=str(Path(SHOTS) / f"model-long-canvas-{width}.png"))
