"""Every map fits its panel at 1440 and 390 px: no sideways scrolling inside a plot, every
drawn label inside the plot's box (labels are thinned, never clipped) (issue 24.6)."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import wait_for_plot

pytestmark = pytest.mark.e2e

# For each plot: its box, the drawn figure's width, and every label outside the box.
MEASURE = """() => [...document.querySelectorAll('.plot')]
  .filter((d) => !d.hidden && d.offsetParent)
  .map((div) => {
    const box = div.getBoundingClientRect();
    const figure = div.querySelector('.quick-svg, .main-svg');
    const labels = [...div.querySelectorAll('text')].filter((t) => t.textContent.trim());
    const out = labels.filter((t) => {
      const r = t.getBoundingClientRect();
      return r.width && (r.left < box.left - 1 || r.right > box.right + 1);
    }).map((t) => t.textContent);
    return {
      id: div.dataset.testid,
      box: Math.round(box.width),
      figure: figure ? Math.round(figure.getBoundingClientRect().width) : 0,
      scrolls: div.scrollWidth > div.clientWidth + 1,
      clipped: out,
      labels: labels.length,
    };
  })"""


def assert_maps_fit(page: Page) -> list[dict]:
    maps = page.evaluate(MEASURE)
    assert maps
    for m in maps:
        assert m["figure"] <= m["box"] + 1, m
        assert not m["scrolls"], m
        assert not m["clipped"], m
    return maps


@pytest.mark.parametrize("width", [1440, 390])
@pytest.mark.parametrize("preset", ["multi-head", "gpt-head-32d"])
def test_explorer_maps_fit(page: Page, preset: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/?preset={preset}")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    for key in ("x", "attn_weights", "output"):
        wait_for_plot(page, f"plot-{key}")
    assert_maps_fit(page)


@pytest.mark.model
@pytest.mark.parametrize("width", [1440, 390])
def test_a_51_token_real_head_fits(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    words = " ".join(["the river bank was muddy and the money was in the bank"] * 5)
    text = " ".join(words.split()[:49])  # [CLS] + 49 words + [SEP] = 51 tokens
    page.goto(f"/?real=sentence-transformers/all-MiniLM-L6-v2&text={quote(text)}&layer=1&head=1")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=60_000)
    wait_for_plot(page, "plot-attn_scores")
    columns = page.evaluate(
        "() => document.querySelector(\"[data-testid='plot-attn_scores']\").data[0].z[0].length"
    )
    assert columns == 51
    maps = {m["id"]: m for m in assert_maps_fit(page)}
    assert maps["plot-attn_scores"]["labels"] > 10
