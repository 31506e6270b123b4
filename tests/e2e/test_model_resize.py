"""/model's plots follow the window: from 1440 to 390 px nothing runs past the right edge,
not even before the plots are drawn again (the old drawing is clipped to its plot, and a
plot in a grid, compare-one-word's, no longer holds its track at the old width), then
every plot shown (the large map, the token view's strip, compare-one-word's curve; the
large map as a Plotly figure once reached for) is as wide as its card; back at 1440 px
they grow again.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.test_model_4k import WIDER_THAN, no_wider_than

pytestmark = [pytest.mark.e2e, pytest.mark.model]

TEXT = "the river bank was muddy after the rain"

# Every plot shown: [test id, its width, its drawing's width] (the quick renderer's
# figure, or Plotly's SVG).
PLOTS = """() => [...document.querySelectorAll('.plot')]
  .filter((p) => !p.hidden && p.offsetParent && p.querySelector('.quick-plot, svg.main-svg'))
  .map((p) => [p.dataset.testid, p.clientWidth,
    p.querySelector('.quick-plot, svg.main-svg').getBoundingClientRect().width])"""

FOLLOWED = f"""w => {{
  const plots = ({PLOTS})();
  return plots.length >= 2 && plots.every(([, width, drawn]) => width <= w && drawn <= width + 1);
}}"""

GROWN = f"""() => ({PLOTS})().find(([id]) => id === 'zoom-plot')[2] > 600"""


def test_plots_follow_the_window_from_1440_to_390_px(page: Page) -> None:
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/model?text={quote(TEXT)}&tok=3")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "84", timeout=WAIT)
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-token", "3", timeout=WAIT)
    zoom = page.get_by_test_id("zoom-plot")
    expect(zoom).to_have_attribute("data-renderer", "quick", timeout=WAIT)
    page.wait_for_function(GROWN)
    page.screenshot(path=str(ARTIFACTS / "model-resize-1440.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    # At once (before any plot is drawn again): the page does not scroll sideways.
    wide = page.evaluate(WIDER_THAN, 390)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, wide
    page.wait_for_function(FOLLOWED, arg=390)
    no_wider_than(page, 390)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "model-resize-390.png"), full_page=True)
    # Back to 1440 px: the large map grows with its card.
    page.set_viewport_size({"width": 1440, "height": 900})
    page.wait_for_function(GROWN)


def test_a_plotly_figure_follows_the_window(page: Page) -> None:
    """The large map reached for (Plotly takes over) is resized with its card."""
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/model?text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "84", timeout=WAIT)
    zoom = page.get_by_test_id("zoom-plot")
    zoom.hover()
    expect(zoom).to_have_attribute("data-renderer", "plotly", timeout=WAIT)
    page.wait_for_function(GROWN)
    page.mouse.move(0, 0)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.wait_for_function(
        """() => { const p = document.querySelector("[data-testid='zoom-plot']");
          const svg = p.querySelector('svg.main-svg');
          const drawn = svg && svg.getBoundingClientRect().width;
          return p.clientWidth <= 390 && drawn && drawn <= p.clientWidth + 1; }"""
    )
    page.wait_for_function(FOLLOWED, arg=390)  # and the other plots, drawn again
    expect(zoom).to_have_attribute("data-renderer", "plotly")
    no_wider_than(page, 390)
