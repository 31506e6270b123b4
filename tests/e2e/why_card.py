"""The "why this cell" card on the shipped tiny-bank-gpt's "cash" sentence, as /model and the
step-by-step explorer show it (test_model_why, test_explorer_why): a click on a cell of a
head's map, and the card's numbers checked against POST /api/model/why."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api

BANK = "tiny-bank-gpt"
TEXT = "Kim counted the cash, then went to the bank "  # 44 letters, 44 tokens
ROW, COL = 43, 19  # the last letter looks at "cash"'s last letter
TOKENS = 44


def click_map_cell(page: Page, plot: str, row: int, col: int, tokens: int = TOKENS) -> None:
    """Click the centre of cell (row, col) of the ``tokens`` x ``tokens`` map drawn in ``plot``
    (a CSS selector)."""
    cells = page.locator(f"{plot} .quick-cells, {plot} .nsewdrag").first
    cells.scroll_into_view_if_needed()
    box = cells.bounding_box()
    assert box is not None
    page.mouse.click(
        box["x"] + box["width"] * (col + 0.5) / tokens,
        box["y"] + box["height"] * (row + 0.5) / tokens,
    )


def expect_the_apis_pairs(page: Page, server_url: str) -> dict[str, Any]:
    """The card of (ROW, COL) of layer 2 head 1, once drawn: its title, softmax weight, score
    and 12 pairs (the first one's value) are POST /api/model/why's; that answer."""
    card = page.get_by_test_id("why-cell")
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
    body = {"model": BANK, "text": TEXT, "layer": 2, "head": 1, "row": ROW, "col": COL, "top": 40}
    answer: dict[str, Any] = api(server_url, "/api/model/why", body)
    assert answer["weight"] > 0.8  # the head reads "cash"
    expect(card.locator("h2")).to_contain_text("from '␣' (row 43) at 'h' (column 19)")
    summary = page.get_by_test_id("why-summary")
    expect(summary).to_contain_text(f"Softmax weight {answer['weight']:.4f}")
    expect(summary).to_contain_text(f"score {answer['score']:.3f}")
    pairs = page.get_by_test_id("why-pair")
    expect(pairs).to_have_count(12)
    expect(pairs.first).to_contain_text(f"{abs(answer['contributions'][0]['value']):.3f}")
    return answer
