"""/model with a transformers-backed decoder whose layers read a sliding window (a tiny
random Mistral, window 4): the cells beyond the window are masked grey, like the causal
triangle, in the thumbnails and the large map, from the window GET /api/model sends."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api, plot_data, wait_for_plot
from tests.e2e.servers import models_server
from tests.models.hf_checkpoints import LONG_TEXT, make_hf
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

GREY = [208, 215, 222, 255]
# Screenshots for a person to look at, when this names a directory.
SHOTS = os.environ.get("ATTENTION_VIZ_SCREENSHOTS")


def shoot(page: Page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / name), full_page=True)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require("transformers")
    root = tmp_path_factory.mktemp("window-models")
    make_hf(root / "tiny-mistral-window", "tiny-mistral-window")
    with models_server(root) as url:
        yield url


def pixel(page: Page, testid: str, x: int, y: int) -> list[int]:
    return page.evaluate(
        "([id, x, y]) => Array.from(document.querySelector(`[data-testid='${id}'] canvas`)"
        ".getContext('2d').getImageData(x, y, 1, 1).data)",
        [testid, x, y],
    )


def test_cells_beyond_the_window_are_grey(page: Page, server_url: str) -> None:
    info = api(server_url, "/api/model?model=tiny-mistral-window")
    assert info["sliding_windows"] == [4, 4]
    page.goto(f"/model?model=tiny-mistral-window&text={quote(LONG_TEXT)}&layer=2&head=3")
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", str(2 * (4 + 2)), timeout=WAIT)
    wait_for_plot(page, "zoom-plot")
    zoom = page.get_by_test_id("zoom-plot")
    expect(zoom).to_have_attribute("data-head", "3", timeout=WAIT)
    count = int(grid.get_attribute("data-tokens") or 0)
    assert count > 8
    z = plot_data(page, "zoom-plot")
    for i, row in enumerate(z):
        for j, value in enumerate(row):
            masked = j > i or i - j >= 4
            assert (value is None) is masked, (i, j, value)
    text = plot_data(page, "zoom-plot", field="text")
    assert "sliding window" in text[count - 1][0] and "later tokens" in text[0][1]
    expect(page.get_by_test_id("zoom-legend")).to_contain_text("sliding window of 4 tokens")
    # Thumbnails: bottom-left (beyond the window) and top-right (the future) grey,
    # the diagonal and the cell 3 before it coloured.
    assert pixel(page, "map-L2-H3", 0, count - 1) == GREY
    assert pixel(page, "map-L2-H3", count - 1, 0) == GREY
    assert pixel(page, "map-L2-H3", count - 1, count - 1) != GREY
    assert pixel(page, "map-L2-H3", count - 4, count - 1) != GREY
    # The rollout reaches beyond one window through the layers before: never greyed there.
    assert pixel(page, "map-L2-rollout", 0, count - 1) != GREY
    assert pixel(page, "map-L2-mean", 0, count - 1) == GREY
    shoot(page, "model-sliding-window-1440.png")


def test_narrow_window_fits(page: Page, server_url: str) -> None:
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(f"/model?model=tiny-mistral-window&text={quote(LONG_TEXT)}&layer=1&head=1")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", str(2 * (4 + 2)), timeout=WAIT
    )
    wait_for_plot(page, "zoom-plot")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    shoot(page, "model-sliding-window-390.png")


def test_a_windowed_head_step_by_step_blanks_what_the_window_masks(
    page: Page, server_url: str
) -> None:
    page.goto(f"/?real=tiny-mistral-window&text={quote(LONG_TEXT)}&layer=1&head=2")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    masked = plot_data(page, "plot-masked_scores")
    weights = plot_data(page, "plot-attn_weights")
    for i, row in enumerate(weights):
        for j, value in enumerate(row):
            blank = j > i or i - j >= 4
            assert (value is None) is blank and (masked[i][j] is None) is blank, (i, j)
    shoot(page, "explorer-sliding-window-1440.png")
