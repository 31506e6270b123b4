"""/model's analysis cards on an encoder-decoder (a small random Marian made here): the
ablation, "why this cell" and attribution cards ask about the stack chosen in the stacks
card's tabs and read the decoder's log p of the target shown there; each card's numbers
are the JSON API's for the same stack and target (cross-attention included)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.servers import MARIAN, marian
from tests.e2e.test_model_seq2seq import SOURCE, TARGET, WAIT, open_marian
from tests.e2e.why_card import click_map_cell

pytestmark = [pytest.mark.e2e, pytest.mark.model]

MODEL = MARIAN


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Overrides the session server for this module: one that lists the Marian."""
    yield from marian(tmp_path_factory, "page-seq2seq-cards")


def asked(**more: Any) -> dict[str, Any]:
    return {"model": MODEL, "text": SOURCE, "target": TARGET, **more}


def open_cards(page: Page, server_url: str, stack: str) -> dict[str, Any]:
    """The Marian with TARGET read, the stack's tab chosen and the analysis cards shown."""
    answer = open_marian(page, server_url)
    page.get_by_test_id(f"s2s-tab-{stack}").click()
    expect(page.get_by_test_id("s2s-panel")).to_have_attribute("data-stack", stack)
    expect(page.get_by_test_id("ablate-stack-hint")).to_be_visible(timeout=WAIT)
    expect(page.get_by_test_id("lens-card")).to_be_hidden()
    return answer


@pytest.mark.parametrize("stack", ["cross", "encoder"])
def test_ablating_one_head_shows_the_apis_loss(page: Page, server_url: str, stack: str) -> None:
    open_cards(page, server_url, stack)
    page.get_by_test_id("ablate-grid-L1-H2").click()
    page.get_by_test_id("ablate-run").click()
    body = asked(stack=stack, heads=[[1, 2]], mode="zero")
    answer = api(server_url, "/api/model/ablate", body)
    expect_ablated(page, stack, "L1 H2", answer)


def expect_ablated(page: Page, stack: str, head: str, answer: dict[str, Any]) -> None:
    """The ablation card shows the API's `answer` for the stack's head (zeroed)."""
    assert abs(answer["loss_before"] - answer["loss_after"]) > 1e-4  # the head matters
    expect(page.get_by_test_id("ablate-summary")).to_contain_text(
        f"Without the {stack} stack's {head} (zero): loss {answer['loss_before']:.3f} → "
        f"{answer['loss_after']:.3f} nats",
        timeout=WAIT,
    )
    expect(page.get_by_test_id("ablate-error")).to_be_empty()


@pytest.mark.parametrize(("stack", "row", "col"), [("cross", 3, 2), ("decoder", 4, 1)])
def test_why_a_cell_of_the_stacks_map_is_the_apis(
    page: Page, server_url: str, stack: str, row: int, col: int
) -> None:
    open_cards(page, server_url, stack)
    expect(page.get_by_test_id("s2s-why-hint")).to_contain_text("Click a cell")
    cell = page.locator(
        f"[data-testid='s2s-map'] tbody tr:nth-child({row + 1}) td:nth-of-type({col + 1})"
    )
    shown = float(cell.get_attribute("data-weight") or "nan")
    cell.click()
    card = page.get_by_test_id("why-cell")
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
    body = asked(stack=stack, layer=1, head=1, row=row, col=col, top=40)
    answer = api(server_url, "/api/model/why", body)
    assert answer["stack"] == stack
    assert answer["weight"] == pytest.approx(shown, abs=1e-3)  # the map's cell (4 digits)
    expect(card.locator("h2")).to_contain_text(f"Why the {stack} stack's layer 1, head 1")
    summary = page.get_by_test_id("why-summary")
    expect(summary).to_contain_text(f"Softmax weight {answer['weight']:.4f}")
    expect(summary).to_contain_text(f"score {answer['score']:.3f}")


def test_why_a_cell_of_the_large_map_is_the_encoders(page: Page, server_url: str) -> None:
    """The page's large map is the encoder's: its cell's why is the encoder stack's."""
    open_cards(page, server_url, "cross")  # the tab chosen does not change the large map's stack
    answer = api(server_url, "/api/model/attention", {"model": MODEL, "text": SOURCE})
    tokens = len(answer["tokens"])
    click_map_cell(page, "[data-testid='zoom-plot']", 2, 1, tokens)
    card = page.get_by_test_id("why-cell")
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
    why = api(server_url, "/api/model/why", asked(stack="encoder", layer=1, head=1, row=2, col=1))
    expect(page.get_by_test_id("why-summary")).to_contain_text(
        f"Softmax weight {why['weight']:.4f}"
    )
    expect(card.locator("h2")).to_contain_text("Why the encoder stack's layer 1")


@pytest.mark.parametrize("stack", ["cross", "decoder"])
def test_attribution_estimates_every_head_of_the_stack(
    page: Page, server_url: str, stack: str
) -> None:
    open_cards(page, server_url, stack)
    expect(page.get_by_test_id("attr-stack-hint")).to_be_visible()
    expect(page.get_by_test_id("attr-loss")).to_be_hidden()  # the target's loss, no menu
    page.get_by_test_id("attr-run").click()
    expect(page.get_by_test_id("attribution")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    body = asked(stack=stack, method="attribution_patching", ablation="zero", confirm_top=3)
    answer = api(server_url, "/api/model/attribute", body)
    assert answer["stack"] == stack
    cells = page.locator("[data-testid^='attr-estimate-L']")
    count = sum(len(row) for row in answer["estimate"])
    expect(cells).to_have_count(count)
    for layer, row in enumerate(answer["estimate"], start=1):
        for head, value in enumerate(row, start=1):
            cell = page.get_by_test_id(f"attr-estimate-L{layer}-H{head}")
            assert float(cell.get_attribute("data-value") or "nan") == pytest.approx(
                value, abs=1e-6
            )
    expect(page.get_by_test_id("attr-note")).to_contain_text(
        f"The grids are the {stack} stack's heads."
    )
    expect(page.get_by_test_id("attr-error")).to_be_empty()
    # A head of the grid opens in its stack, in the stacks card (the encoder tab chosen first).
    page.get_by_test_id("s2s-tab-encoder").click()
    page.get_by_test_id("attr-estimate-L2-H3").click()
    expect(page.get_by_test_id("s2s-panel")).to_have_attribute("data-stack", stack)
    expect(page.get_by_test_id("s2s-zoom-title")).to_contain_text("Layer 2, head 3")


@pytest.mark.parametrize("width", [1440, 390])
def test_the_cards_read_well(browser: Browser, server_url: str, width: int) -> None:
    """Screenshots for a reader (ARTIFACTS), and nothing wider than the window."""
    context = browser.new_context(base_url=server_url, viewport={"width": width, "height": 900})
    page = context.new_page()
    open_cards(page, server_url, "cross")
    page.get_by_test_id("ablate-grid-L1-H1").click()
    page.get_by_test_id("ablate-run").click()
    expect(page.get_by_test_id("ablate-summary")).to_contain_text("loss", timeout=WAIT)
    page.get_by_test_id("attr-run").click()
    expect(page.get_by_test_id("attribution")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    page.locator("[data-testid='s2s-map'] tbody tr:nth-child(3) td").first.click()
    expect(page.get_by_test_id("why-cell")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    out = Path(ARTIFACTS)
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"model-seq2seq-cards-{width}.png"), full_page=True)
    for card in ("why-cell", "ablate-card", "attribution"):  # each alone, to read at 390 px
        page.get_by_test_id(card).screenshot(path=str(out / f"model-seq2seq-{card}-{width}.png"))
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width
    context.close()
