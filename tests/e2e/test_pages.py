"""Every page loads, draws its plots and makes no error, failed or off-origin request."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import wait_for_plot

pytestmark = pytest.mark.e2e

PAGES = {
    "/": ["plot-x", "plot-q", "plot-attn_scores", "plot-attn_weights", "plot-context_vec"],
    "/compare": ["plot-weights-a", "plot-weights-b", "plot-context-a", "plot-context-b"],
    "/lessons": ["plot-variance", "plot-sharpness", "plot-avg-weights", "plot-head-weights"],
}


@pytest.mark.parametrize("path", list(PAGES))
def test_page_loads_cleanly(page: Page, path: str) -> None:
    response = page.goto(path)
    assert response is not None and response.status == 200
    csp = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    for testid in PAGES[path]:
        wait_for_plot(page, testid)
        # Drawn at once without Plotly (quick renderer: axes and labels in SVG).
        expect(page.locator(f"[data-testid='{testid}'] .quick-svg").first).to_be_visible()
    # No inline scripts other than the JSON data block and the import map, which the
    # CSP allows by its hash (CSP forbids any other anyway).
    inline = page.eval_on_selector_all(
        "script:not([src])",
        "els => els.filter(e => !['application/json', 'importmap'].includes(e.type)).length",
    )
    assert inline == 0
    # Every module came through its versioned URL (the import map), cached for good.
    modules = page.evaluate(
        "() => performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => n.includes('/static/js/'))"
    )
    assert modules and all(re.search(r"\.js\?v=[0-9a-f]{12}$", m) for m in modules), modules


def test_every_plot_exports_png_and_svg(page: Page) -> None:
    page.goto("/")
    wait_for_plot(page, "plot-attn_weights")
    plot = page.locator("[data-testid='plot-attn_weights']")
    plot.hover()  # loads Plotly, which takes over every plot
    with page.expect_download() as svg:
        plot.locator(".modebar-btn[data-title='Download plot as SVG']").click()
    assert svg.value.suggested_filename.endswith(".svg")
    with page.expect_download() as png:
        plot.locator(".modebar-btn[data-title*='png' i]").click()
    assert png.value.suggested_filename.endswith(".png")
    # Every drawn heatmap carries the same export configuration.
    configs = page.evaluate(
        "() => [...document.querySelectorAll('.js-plotly-plot')].map(d =>"
        " [d._context.toImageButtonOptions.format,"
        "  d._context.modeBarButtonsToAdd.map(b => b.name || b).join()])"
    )
    assert configs and all(c == ["png", "downloadSvg,downloadjson"] for c in configs), configs


def test_download_trace_json(page: Page) -> None:
    import json

    page.goto("/")
    wait_for_plot(page, "plot-attn_weights")
    with page.expect_download() as download:
        page.get_by_test_id("download-trace").click()
    payload = json.loads(open(download.value.path(), encoding="utf-8").read())
    assert payload["request"]["tokens"] == ["stream", "bank", "mud"]
    assert len(payload["response"]["heads"][0]["attn_weights"]) == 3
