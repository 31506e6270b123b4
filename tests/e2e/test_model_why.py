"""/model's "why this cell" and one-pass attribution in a real browser, on the shipped
tiny-bank-gpt: a clicked cell of layer 2 head 1's map is split into component pairs (the
API's numbers, the weight beside the score); the fast estimate draws the API's grid with
its top heads confirmed exactly; the exact grid says where estimate and exact disagree;
1440 and 390 px."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import api, watched_page
from tests.e2e.head_cards import signed_colours
from tests.e2e.servers import built_in_and_gpt2
from tests.e2e.why_card import BANK, COL, ROW, TEXT, WAIT, click_map_cell, expect_the_apis_pairs

pytestmark = [pytest.mark.e2e, pytest.mark.model]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from built_in_and_gpt2(tmp_path_factory, "why-models")


def click_cell(page: Page, row: int, col: int) -> None:
    page.goto(f"/model?model={BANK}&text={quote(TEXT)}&layer=2&head=1")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-head", "1", timeout=WAIT)
    click_map_cell(page, "[data-testid='zoom-plot']", row, col)


def open_bank(page: Page) -> None:
    page.goto(f"/model?model={BANK}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)


def run_attribution(page: Page, method: str | None = None) -> None:
    """Run the attribution card (``method`` chosen first, if given) until it is drawn."""
    card = page.get_by_test_id("attribution")
    expect(card).to_be_visible(timeout=WAIT)
    if method is not None:
        page.get_by_test_id("attr-method").select_option(method)
    page.get_by_test_id("attr-run").click()
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)


def test_a_clicked_cell_is_split_into_the_apis_pairs(page: Page, server_url: str) -> None:
    click_cell(page, ROW, COL)
    expect_the_apis_pairs(page, server_url)
    expect(page.get_by_test_id("why-grid-row")).to_have_count(7)  # 7 components on layer 2


def test_a_masked_cell_says_so(page: Page) -> None:
    click_cell(page, 5, 30)
    expect(page.get_by_test_id("why-error")).to_contain_text("masked", timeout=WAIT)


def test_the_fast_estimate_and_the_exact_grid(page: Page, server_url: str) -> None:
    open_bank(page)
    run_attribution(page)
    body = {"model": BANK, "text": TEXT, "target": {"position": 43}, "confirm_top": 3}
    answer = api(server_url, "/api/model/attribute", body)
    cell = page.get_by_test_id("attr-estimate-L2-H1")
    assert float(cell.get_attribute("data-value") or "nan") == pytest.approx(
        answer["estimate"][1][0], abs=1e-6
    )
    expect(page.get_by_test_id("attr-confirmed-row")).to_have_count(3)
    note = page.get_by_test_id("attr-note")
    expect(note).to_contain_text("Numbers marked ≈ are attribution patching estimates")
    expect(note).to_contain_text("−log p('a') after '␣' (position 43)")
    page.get_by_test_id("attr-exact").click()
    expect(page.get_by_test_id("attr-exact-grid")).to_be_visible(timeout=WAIT)
    for grid in ("attr-estimate", "attr-exact-grid"):
        signed_colours(page.get_by_test_id(grid))
    expect(note).to_contain_text("estimate ranks L2 H1 first")
    expect(note).to_contain_text("exact ablation ranks L1 H3 first")


def test_atp_star_marks_the_heads_whose_paths_cancel(page: Page, server_url: str) -> None:
    """AtP* on the "cash" sentence: the GradDrop grid is the API's, the heads the API lists
    as cancelled are marked ⇄ in both grids and listed, the rest are not, the confirmed heads
    are those of the largest GradDrop score, and the note says what the mark means."""
    open_bank(page)
    run_attribution(page, "atp_star")
    card = page.get_by_test_id("attribution")
    body = {
        "model": BANK,
        "text": TEXT,
        "method": "atp_star",
        "target": {"position": 43},
        "confirm_top": 3,
    }
    answer = api(server_url, "/api/model/attribute", body)
    assert answer["cancelled"] == [{"layer": 1, "head": 1}]  # −0.04 estimated, 0.12 scored
    for layer, row in enumerate(answer["graddrop"], start=1):
        for head, value in enumerate(row, start=1):
            cell = page.get_by_test_id(f"attr-graddrop-L{layer}-H{head}")
            assert float(cell.get_attribute("data-value") or "nan") == pytest.approx(value)
    marked = card.locator("[data-cancelled='1']")
    expect(marked).to_have_count(2)  # L1 H1 in the estimate and in the GradDrop grid
    expect(page.get_by_test_id("attr-estimate-L1-H1")).to_have_attribute(
        "aria-label", re.compile("paths cancel")
    )
    expect(page.get_by_test_id("attr-cancelled-row")).to_have_count(1)
    expect(page.get_by_test_id("attr-cancelled-row")).to_contain_text("L1 H1")
    expect(page.get_by_test_id("attr-table")).to_contain_text("largest GradDrop scores")
    confirmed = page.get_by_test_id("attr-confirmed-row")
    expect(confirmed).to_have_count(3)
    expect(confirmed.nth(1)).to_contain_text("L1 H3")  # the head exact ablation ranks first
    note = page.get_by_test_id("attr-note")
    expect(note).to_contain_text("Numbers marked ≈ are AtP* estimates")
    expect(note).to_contain_text("marks a head whose GradDrop score is over twice")
    expect(page.get_by_test_id("attr-cancelled")).to_contain_text("effects cancel out")


@pytest.mark.parametrize("width", [1440, 390])
def test_the_atp_star_card_fits_and_is_seen(
    browser: Browser, server_url: str, width: int, tmp_path: Path
) -> None:
    viewport = {"width": width, "height": 900}
    with watched_page(browser, server_url, viewport=viewport) as page:  # no console error
        page.goto(f"/model?model={BANK}&text={quote(TEXT)}")
        run_attribution(page, "atp_star")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        path = tmp_path / f"attribution-atp-star-{width}.png"
        page.get_by_test_id("attribution").screenshot(path=str(path))


@pytest.mark.parametrize("width", [1440, 390])
def test_both_cards_fit_and_are_seen(
    browser: Browser, server_url: str, width: int, tmp_path: Path
) -> None:
    viewport = {"width": width, "height": 900}
    with watched_page(browser, server_url, viewport=viewport) as page:  # no console error
        click_cell(page, ROW, COL)
        expect(page.get_by_test_id("why-cell")).to_have_attribute("data-drawn", "1", timeout=WAIT)
        page.get_by_test_id("attr-exact").click()
        expect(page.get_by_test_id("attr-exact-grid")).to_be_visible(timeout=WAIT)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        for card in ("why-cell", "attribution"):  # to look at: pytest --basetemp
            page.get_by_test_id(card).screenshot(path=str(tmp_path / f"{card}-{width}.png"))
