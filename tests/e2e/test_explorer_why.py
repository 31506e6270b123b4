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

from tests.e2e.conftest import api
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2

pytestmark = [pytest.mark.e2e, pytest.mark.model]

WAIT = 60_000  # ms: forward passes and drawing on a loaded 2-core machine
BANK = "tiny-bank-gpt"
TEXT = "Kim counted the cash, then went to the bank "  # 44 letters, 44 tokens
ROW, COL = 43, 19  # the last letter looks at "cash"'s last letter


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("explorer-why-models")
    make_gpt2(root / "tiny-gpt2")
    with models_server(root) as url:
        yield url


def click_weights_cell(page: Page, row: int, col: int, tokens: int = 44) -> None:
    """Open layer 2 head 1 in the explorer and click (row, col) of its weights map."""
    page.goto(f"/?real={BANK}&text={quote(TEXT)}&layer=2&head=1")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    plot = "[data-testid='plot-attn_weights']"
    cells = page.locator(f"{plot} .quick-cells, {plot} .nsewdrag").first
    cells.scroll_into_view_if_needed()
    box = cells.bounding_box()
    assert box is not None
    page.mouse.click(
        box["x"] + box["width"] * (col + 0.5) / tokens,
        box["y"] + box["height"] * (row + 0.5) / tokens,
    )


def test_a_clicked_weights_cell_shows_the_apis_score(page: Page, server_url: str) -> None:
    click_weights_cell(page, ROW, COL)
    card = page.get_by_test_id("why-cell")
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
    body = {"model": BANK, "text": TEXT, "layer": 2, "head": 1, "row": ROW, "col": COL, "top": 40}
    answer = api(server_url, "/api/model/why", body)
    assert answer["weight"] > 0.8  # the head reads "cash"
    expect(card.locator("h2")).to_contain_text("from '␣' (row 43) at 'h' (column 19)")
    summary = page.get_by_test_id("why-summary")
    expect(summary).to_contain_text(f"Softmax weight {answer['weight']:.4f}")
    expect(summary).to_contain_text(f"score {answer['score']:.3f}")
    pairs = page.get_by_test_id("why-pair")
    expect(pairs).to_have_count(12)
    expect(pairs.first).to_contain_text(f"{abs(answer['contributions'][0]['value']):.3f}")
    expect(card).to_contain_text("Click a cell of the attention-weights map")


def test_a_masked_weights_cell_says_so(page: Page) -> None:
    click_weights_cell(page, 5, 30)
    expect(page.get_by_test_id("why-error")).to_contain_text("masked", timeout=WAIT)


@pytest.mark.parametrize("width", [1440, 390])
def test_the_card_fits_and_is_seen(
    browser: Browser, server_url: str, width: int, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        click_weights_cell(page, ROW, COL)
        card = page.get_by_test_id("why-cell")
        expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        card.screenshot(path=str(tmp_path / f"explorer-why-{width}.png"))  # pytest --basetemp
        assert errors == []
    finally:
        context.close()
