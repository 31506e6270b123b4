"""The notebook's model view (``attention_viz.model_view``) saved as a page and opened in
Chromium: several tokens at once in its token view (shift- or ctrl-click), their rows
averaged or summed, equal to transformers' eager attention combined; at 390 px nothing
runs past the right edge (the large map included), and after a resize from 1440 to 390 px
the large map is as wide as its card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from app.notebook import model_view
from tests.e2e.conftest import ARTIFACTS, plot_data
from tests.e2e.test_model_4k import no_wider_than
from tests.e2e.test_model_multi_token import assert_rows, combined
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

TOKENS = ["The", "Ġbank", "Ġof", "Ġthe", "Ġriver", "Ġwas", "Ġmuddy", "Ġafter", "Ġrain"]
LAYERS, HEADS = 2, 3
FLOAT_ERROR = 1 / 510  # the view's maps are uint8


@pytest.fixture(scope="module")
def attention() -> Any:
    """A random GPT-2's eager attention over TOKENS: a tuple of (1, H, T, T) per layer."""
    torch = require("torch")
    transformers = require("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=LAYERS,
        n_head=HEADS,
        n_embd=24,
        vocab_size=64,
        n_positions=32,
        attn_implementation="eager",
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.tensor([[5, 9, 11, 3, 17, 21, 9, 30, 41]])
    with torch.no_grad():
        return model(ids, output_attentions=True).attentions


@pytest.fixture(scope="module")
def saved(attention: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    view = model_view(attention, TOKENS, html_action="return")
    assert view is not None
    return view.save(tmp_path_factory.mktemp("nb-view") / "model_view.html")


def opened(browser: Browser, saved: Path, width: int) -> tuple[Page, list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(saved.resolve().as_uri())
    page.wait_for_function("document.body.dataset.drawn === '1'")
    return page, errors


def drawn(page: Page, queries: str, combine: str) -> None:
    expect(page.get_by_test_id("token-view")).to_have_attribute(
        "data-drawn-tokens", f"{queries}:{combine}"
    )


def test_several_tokens_in_the_notebooks_token_view(
    browser: Browser, saved: Path, attention: Any
) -> None:
    page, errors = opened(browser, saved, 1440)
    maps = [layer[0].tolist() for layer in attention]  # (L, H, T, T)
    tokens = page.get_by_test_id("wp-token")
    expect(tokens).to_have_count(len(TOKENS))
    tokens.nth(2).click()
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-token", "2")
    tokens.nth(4).click(modifiers=["Shift"])
    tokens.nth(7).click(modifiers=["Control"])
    drawn(page, "2,4,7", "mean")
    expect(page.get_by_test_id("tv-chip")).to_have_count(3)
    for i in (2, 4, 7):
        expect(tokens.nth(i)).to_have_attribute("aria-pressed", "true")
    what = page.get_by_test_id("tv-what")
    expect(what).to_contain_text("What 3 tokens read, their rows averaged")
    strip = plot_data(page, "tv-strip")
    assert_rows(strip, combined(maps, [2, 4, 7], "mean", causal=True), FLOAT_ERROR)
    page.get_by_test_id("tv-combine-sum").check()
    drawn(page, "2,4,7", "sum")
    strip = plot_data(page, "tv-strip")
    assert_rows(strip, combined(maps, [2, 4, 7], "sum", causal=True), 3 * FLOAT_ERROR)
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("token-view").screenshot(path=str(ARTIFACTS / "notebook-several-1440.png"))
    # A chip removes its token; a plain click shows one token alone again.
    page.get_by_test_id("tv-chip").nth(0).click()
    drawn(page, "4,7", "sum")
    tokens.nth(1).click()
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-drawn-tokens", "")
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-token", "1")
    expect(page.get_by_test_id("tv-chip")).to_have_count(0)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "notebook-tokens-1440.png"), full_page=True)
    page.close()
    assert not errors, errors


def zoom_fits(page: Page) -> None:
    """The large map (as drawn: the quick renderer's figure) is no wider than its card's
    content box."""
    widths = page.evaluate(
        """() => {
      const plot = document.querySelector("[data-testid='zoom-plot']");
      const card = plot.closest('.card');
      const style = getComputedStyle(card);
      const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
      const inner = card.clientWidth - padding;
      const drawing = plot.querySelector('.quick-plot, svg.main-svg');
      return [drawing.getBoundingClientRect().width, inner];
    }"""
    )
    assert widths[0] <= widths[1] + 1, widths


@pytest.mark.parametrize("width", [390, 1440])
def test_the_notebook_view_fits_its_width(browser: Browser, saved: Path, width: int) -> None:
    page, errors = opened(browser, saved, width)
    zoom_fits(page)
    no_wider_than(page, width)
    page.screenshot(path=str(ARTIFACTS / f"notebook-view-{width}.png"), full_page=True)
    if width == 1440:  # narrowed: never wider than the window, and the plot follows its card
        page.set_viewport_size({"width": 390, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.wait_for_function(FOLLOWED)
        zoom_fits(page)
        no_wider_than(page, 390)
    page.close()
    assert not errors, errors


# The large map has been drawn again at its card's new width.
FOLLOWED = """() => {
  const plot = document.querySelector("[data-testid='zoom-plot']");
  const drawing = plot.querySelector('.quick-plot, svg.main-svg');
  return drawing && drawing.getBoundingClientRect().width <= plot.clientWidth + 1;
}"""
