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
    root = tmp_path_factory.mktemp("why-models")
    make_gpt2(root / "tiny-gpt2")
    with models_server(root) as url:
        yield url


def click_cell(page: Page, row: int, col: int, tokens: int = 44) -> None:
    page.goto(f"/model?model={BANK}&text={quote(TEXT)}&layer=2&head=1")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-head", "1", timeout=WAIT)
    cells = page.locator(
        "[data-testid='zoom-plot'] .quick-cells, [data-testid='zoom-plot'] .nsewdrag"
    ).first
    cells.scroll_into_view_if_needed()
    box = cells.bounding_box()
    assert box is not None
    x = box["x"] + box["width"] * (col + 0.5) / tokens
    y = box["y"] + box["height"] * (row + 0.5) / tokens
    page.mouse.click(x, y)


def test_a_clicked_cell_is_split_into_the_apis_pairs(page: Page, server_url: str) -> None:
    click_cell(page, ROW, COL)
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
    first = answer["contributions"][0]
    expect(pairs.first).to_contain_text(f"{abs(first['value']):.3f}")
    expect(page.get_by_test_id("why-grid-row")).to_have_count(7)  # 7 components on layer 2


def test_a_masked_cell_says_so(page: Page) -> None:
    click_cell(page, 5, 30)
    expect(page.get_by_test_id("why-error")).to_contain_text("masked", timeout=WAIT)


def test_the_fast_estimate_and_the_exact_grid(page: Page, server_url: str) -> None:
    page.goto(f"/model?model={BANK}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)
    card = page.get_by_test_id("attribution")
    expect(card).to_be_visible()
    page.get_by_test_id("attr-run").click()
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
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
    expect(note).to_contain_text("estimate ranks L2 H1 first")
    expect(note).to_contain_text("exact ablation ranks L1 H3 first")


def test_atp_star_marks_the_heads_whose_paths_cancel(page: Page, server_url: str) -> None:
    """AtP* on the "cash" sentence: the GradDrop grid is the API's, the heads the API lists
    as cancelled are marked ⇄ in both grids and listed, the rest are not, the confirmed heads
    are those of the largest GradDrop score, and the note says what the mark means."""
    page.goto(f"/model?model={BANK}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)
    card = page.get_by_test_id("attribution")
    page.get_by_test_id("attr-method").select_option("atp_star")
    page.get_by_test_id("attr-run").click()
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
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
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(f"/model?model={BANK}&text={quote(TEXT)}")
        card = page.get_by_test_id("attribution")
        expect(card).to_be_visible(timeout=WAIT)
        page.get_by_test_id("attr-method").select_option("atp_star")
        page.get_by_test_id("attr-run").click()
        expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        card.screenshot(path=str(tmp_path / f"attribution-atp-star-{width}.png"))
        assert errors == []
    finally:
        context.close()


@pytest.mark.parametrize("width", [1440, 390])
def test_both_cards_fit_and_are_seen(
    browser: Browser, server_url: str, width: int, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        click_cell(page, ROW, COL)
        expect(page.get_by_test_id("why-cell")).to_have_attribute("data-drawn", "1", timeout=WAIT)
        page.get_by_test_id("attr-exact").click()
        expect(page.get_by_test_id("attr-exact-grid")).to_be_visible(timeout=WAIT)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        for card in ("why-cell", "attribution"):  # to look at: pytest --basetemp
            page.get_by_test_id(card).screenshot(path=str(tmp_path / f"{card}-{width}.png"))
        assert errors == []
    finally:
        context.close()
