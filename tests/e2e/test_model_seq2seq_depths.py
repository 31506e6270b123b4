"""/model's ablation card on an encoder-decoder whose stacks differ in depth (a small
random Marian with a 1-layer encoder and a 2-layer decoder): its head grid is the chosen
stack's own, and a head only the decoder has ablates to the JSON API's loss."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.servers import MARIAN, marian
from tests.e2e.test_model_seq2seq import SOURCE, TARGET, open_marian
from tests.e2e.test_model_seq2seq_cards import expect_ablated

pytestmark = [pytest.mark.e2e, pytest.mark.model]

HEADS = 4  # the fixture's, in each stack


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Overrides the session server for this module: a Marian with stacks of two depths."""
    yield from marian(tmp_path_factory, "page-seq2seq-depths", encoder_layers=1, decoder_layers=2)


def choose(page: Page, stack: str) -> None:
    page.get_by_test_id(f"s2s-tab-{stack}").click()
    expect(page.get_by_test_id("s2s-panel")).to_have_attribute("data-stack", stack)


def test_the_grid_is_the_chosen_stacks_and_its_deeper_head_ablates(
    page: Page, server_url: str
) -> None:
    open_marian(page, server_url)
    cells = page.locator("[data-testid^='ablate-grid-L']")
    choose(page, "encoder")
    expect(cells).to_have_count(1 * HEADS)
    for stack in ("decoder", "cross"):
        choose(page, stack)
        expect(cells).to_have_count(2 * HEADS)
    choose(page, "encoder")
    expect(cells).to_have_count(1 * HEADS)
    choose(page, "decoder")
    page.get_by_test_id("ablate-grid-L2-H1").click()
    page.get_by_test_id("ablate-run").click()
    body = {"model": MARIAN, "text": SOURCE, "target": TARGET, "stack": "decoder"}
    answer = api(server_url, "/api/model/ablate", {**body, "heads": [[2, 1]], "mode": "zero"})
    expect_ablated(page, "decoder", "L2 H1", answer)
    page.set_viewport_size({"width": 1440, "height": 900})
    out = Path(ARTIFACTS)
    out.mkdir(parents=True, exist_ok=True)
    page.get_by_test_id("ablate-card").screenshot(path=str(out / "model-seq2seq-depths-1440.png"))
