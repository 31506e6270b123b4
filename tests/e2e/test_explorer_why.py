"""The step-by-step explorer showing a real head (/?real=…) explains a clicked cell of its
attention-weights map with /model's card (model-why.js mounted, not copied): on the shipped
tiny-bank-gpt, the card's score and weight are POST /api/model/why's for that cell; 1440
and 390 px."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import watched_page
from tests.e2e.servers import built_in_and_gpt2
from tests.e2e.why_card import BANK, COL, ROW, TEXT, WAIT, click_map_cell, expect_the_apis_pairs

pytestmark = [pytest.mark.e2e, pytest.mark.model]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from built_in_and_gpt2(tmp_path_factory, "explorer-why-models")


def click_weights_cell(page: Page, row: int, col: int) -> None:
    """Open layer 2 head 1 in the explorer and click (row, col) of its weights map."""
    page.goto(f"/?real={BANK}&text={quote(TEXT)}&layer=2&head=1")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    click_map_cell(page, "[data-testid='plot-attn_weights']", row, col)


def test_a_clicked_weights_cell_shows_the_apis_score(page: Page, server_url: str) -> None:
    click_weights_cell(page, ROW, COL)
    expect_the_apis_pairs(page, server_url)
    card = page.get_by_test_id("why-cell")
    expect(card).to_contain_text("Click a cell of the attention-weights map")


def test_a_masked_weights_cell_says_so(page: Page) -> None:
    click_weights_cell(page, 5, 30)
    expect(page.get_by_test_id("why-error")).to_contain_text("masked", timeout=WAIT)


@pytest.mark.parametrize("width", [1440, 390])
def test_the_card_fits_and_is_seen(
    browser: Browser, server_url: str, width: int, tmp_path: Path
) -> None:
    viewport = {"width": width, "height": 900}
    with watched_page(browser, server_url, viewport=viewport) as page:  # no console error
        click_weights_cell(page, ROW, COL)
        card = page.get_by_test_id("why-cell")
        expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        card.screenshot(path=str(tmp_path / f"explorer-why-{width}.png"))  # pytest --basetemp
