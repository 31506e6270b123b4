"""/model's head analysis in a real browser: the score grid draws and equals the API's;
sorting by a score opens that head; ablating a head of the shipped tiny-bank-gpt changes
its next-letter prediction; the logit lens and value-weighted maps; 390 px.

A server of its own lists the built-in models (tiny-bank-gpt, MiniLM) and a random GPT-2.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api
from tests.e2e.head_cards import signed_colours
from tests.e2e.servers import built_in_and_gpt2

pytestmark = [pytest.mark.e2e, pytest.mark.model]

BANK = "tiny-bank-gpt"
TEXT = "Ann needed a loan, then ran to the bank "  # the next letter decides the sense


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from built_in_and_gpt2(tmp_path_factory, "heads-models")


def open_bank(page: Page) -> None:
    page.goto(f"/model?model={BANK}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)
    page.get_by_test_id("scores-run").click()
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)


def zoomed(page: Page) -> tuple[str | None, str | None]:
    zoom = page.get_by_test_id("zoom-plot")
    return zoom.get_attribute("data-layer"), zoom.get_attribute("data-head")


def test_the_score_grid_draws_the_apis_scores(page: Page, server_url: str) -> None:
    open_bank(page)
    scores = api(server_url, "/api/model/head-scores", {"model": BANK, "text": TEXT, "seed": 0})
    grid = page.get_by_test_id("score-grid")
    expect(grid.locator(".hg-cell")).to_have_count(2 * 4)
    for layer in (1, 2):
        for head in (1, 4):
            cell = page.get_by_test_id(f"score-grid-L{layer}-H{head}")
            value = float(cell.get_attribute("data-value") or "nan")
            assert value == pytest.approx(scores["previous_token"][layer - 1][head - 1], abs=1e-6)
    expect(page.get_by_test_id("score-label")).to_contain_text("previous token")
    expect(page.get_by_test_id("score-row")).to_have_count(8)


@pytest.mark.parametrize("score", ["first_token", "entropy", "induction"])
def test_sorting_by_a_score_opens_its_strongest_head(
    page: Page, server_url: str, score: str
) -> None:
    open_bank(page)
    grid = api(server_url, "/api/model/head-scores", {"model": BANK, "text": TEXT})[score]
    flat = [
        (v, layer + 1, head + 1) for layer, row in enumerate(grid) for head, v in enumerate(row)
    ]
    _, layer, head = max(flat)
    page.get_by_test_id("score-sort").select_option(score)
    expect(page.get_by_test_id("zoom-title")).to_have_text(f"Layer {layer}, head {head}")
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-head", str(head), timeout=WAIT)
    assert zoomed(page) == (str(layer), str(head))
    first = page.get_by_test_id("score-row").first
    assert (first.get_attribute("data-layer"), first.get_attribute("data-head")) == (
        str(layer),
        str(head),
    )
    # Weakest first: the other end opens; "the top 10" of 8 heads keeps all 8.
    _, low_layer, low_head = min(flat)
    page.get_by_test_id("score-order").select_option("asc")
    expect(page.get_by_test_id("zoom-title")).to_have_text(f"Layer {low_layer}, head {low_head}")
    # A row's head opens its map.
    page.get_by_test_id("score-row").nth(2).get_by_role("button").click()
    row = page.get_by_test_id("score-row").nth(2)
    expect(page.get_by_test_id("zoom-title")).to_have_text(
        f"Layer {row.get_attribute('data-layer')}, head {row.get_attribute('data-head')}"
    )


def test_ablating_the_look_back_head_changes_the_next_letter(page: Page) -> None:
    """Layer 2 head 1 reads the cue ("loan"); without it the model stops predicting the
    money sense after "bank " (the last position's top letter changes)."""
    open_bank(page)
    page.get_by_test_id("ablate-grid-L2-H1").click()
    expect(page.get_by_test_id("ablate-grid-L2-H1")).to_have_attribute("aria-pressed", "true")
    page.get_by_test_id("ablate-mode").select_option("mean")
    page.get_by_test_id("ablate-run").click()
    expect(page.get_by_test_id("ablate-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    expect(page.get_by_test_id("ablate-summary")).to_contain_text("Without L2 H1 (mean): loss")
    last = page.get_by_test_id("ablate-row").last
    expect(last).to_have_attribute("data-changed", "1")
    cells = last.locator("td")
    assert cells.nth(2).inner_text().startswith("a ")  # before: "a" (money: "account"…)
    assert not cells.nth(3).inner_text().startswith("a ")
    # Every head alone: a grid of Δloss; clicking a head opens its map.
    page.get_by_test_id("ablate-each").click()
    expect(page.get_by_test_id("each-grid").locator(".hg-cell")).to_have_count(8, timeout=WAIT)
    signed_colours(page.get_by_test_id("each-grid"))  # Δloss: red the loss rose, blue it fell
    page.get_by_test_id("each-grid-L1-H3").click()
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 1, head 3")


def test_the_ablate_button_waits_for_a_chosen_head(page: Page) -> None:
    open_bank(page)
    expect(page.get_by_test_id("ablate-run")).to_be_disabled()
    page.get_by_test_id("ablate-grid-L1-H1").click()
    page.get_by_test_id("ablate-grid-L1-H1").click()  # chosen, then not
    expect(page.get_by_test_id("ablate-run")).to_be_disabled()


def test_the_logit_lens_table_has_a_row_per_layer(page: Page, server_url: str) -> None:
    open_bank(page)
    page.get_by_test_id("lens-run").click()
    expect(page.get_by_test_id("lens-row")).to_have_count(2, timeout=WAIT)
    lens = api(server_url, "/api/model/logit-lens", {"model": BANK, "text": TEXT})
    last = page.get_by_test_id("lens-row").last.locator("td").last
    assert last.inner_text() == lens["top_tokens"][1][-1][0].replace(" ", "␣")


def test_value_weighted_maps_redraw_the_grid(page: Page) -> None:
    open_bank(page)
    page.get_by_test_id("map-measure").select_option("value_norm")
    expect(page).to_have_url(re.compile(r"measure=value_norm"), timeout=WAIT)
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", str(2 * 6), timeout=WAIT
    )
    # The new maps' scores (asked for, the card in view) arrive before the reload, which
    # would abort their request.
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    page.reload()
    expect(page.get_by_test_id("map-measure")).to_have_value("value_norm")


def test_an_encoder_shows_the_embedding_cosine_and_no_lens(page: Page) -> None:
    grid = page.get_by_test_id("head-grid")
    page.goto("/model?text=The%20bank%20approved%20it.")
    expect(grid).to_have_attribute("data-drawn", str(6 * 14), timeout=WAIT)
    page.get_by_test_id("scores-run").click()
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    # A new text is scored as its maps arrive, once scores were asked for.  Until they
    # arrive the cards still show the last text's (drawn "1"): the grid's data-drawn, "0"
    # from the click until the new maps and their cards are shown, says when they are.
    page.get_by_test_id("model-text").fill("The river bank was muddy.")
    page.get_by_test_id("model-run").click()
    expect(grid).to_have_attribute("data-tokens", "8", timeout=WAIT)
    expect(grid).to_have_attribute("data-drawn", str(6 * 14), timeout=WAIT)
    expect(page.get_by_test_id("score-grid")).to_have_count(1, timeout=WAIT)
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    expect(page.get_by_test_id("lens-card")).to_be_hidden()
    page.get_by_test_id("ablate-grid-L1-H1").click()
    page.get_by_test_id("ablate-run").click()
    expect(page.get_by_test_id("ablate-summary")).to_contain_text("cosine", timeout=WAIT)


def test_the_panels_fit_390_px(browser: Browser, server_url: str, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, base_url=server_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        open_bank(page)
        page.get_by_test_id("ablate-grid-L2-H1").click()
        page.get_by_test_id("ablate-run").click()
        expect(page.get_by_test_id("ablate-card")).to_have_attribute(
            "data-drawn", "1", timeout=WAIT
        )
        page.get_by_test_id("lens-run").click()
        expect(page.get_by_test_id("lens-row")).to_have_count(2, timeout=WAIT)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert errors == []
    finally:
        context.close()
