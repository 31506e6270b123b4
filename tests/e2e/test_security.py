"""Token text is data: markup in a token shows literally and runs nothing."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import plot_data, tick_texts, wait_for_plot

pytestmark = pytest.mark.e2e

IMG = "<img src=x onerror=window.__pwned=1>"
BOLD = "<b>x</b>"


def test_markup_tokens_display_literally(page: Page) -> None:
    page.goto("/")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    wait_for_plot(page, "plot-attn_weights")
    page.get_by_label("Embedding", exact=True).select_option("hashed")
    page.wait_for_function("() => location.search.includes('hashed')")
    word = page.get_by_label("Add a word")
    word.fill(IMG)
    word.press("Enter")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-attn_weights']\").data[0].z.length === 4"
    )
    word.fill(BOLD)
    word.press("Enter")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-attn_weights']\").data[0].z.length === 5"
    )
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    # Long tokens are shortened on the axes (whole in the hover), never interpreted.
    expected = ["stream", "bank", "mud", IMG[:13] + "…", BOLD]
    for testid in ("plot-attn_weights", "plot-attn_scores", "plot-x"):
        assert tick_texts(page, testid, "y") == expected
    assert tick_texts(page, "plot-attn_weights", "x") == expected
    # Plotly drew no markup from the tokens: no bold tspan, no <img> anywhere.
    assert page.locator("[data-testid='plot-attn_weights'] tspan[style*='bold']").count() == 0
    assert page.locator("main img").count() == 0
    # The hover text carries the escaped form, which Plotly shows literally.
    text = plot_data(page, "plot-attn_weights", field="text")
    assert "&lt;b&gt;x&lt;/b&gt;" in text[4][4] and "<b>" not in text[4][4]
    assert "&lt;img src=x onerror=window.__pwned=1&gt;" in text[3][3] and "<img" not in text[3][3]
    # Chips and the grid row headers show the raw text.
    expect(page.get_by_test_id("token-chip").nth(3)).to_contain_text(IMG)
    expect(page.get_by_test_id("token-chip").nth(4)).to_contain_text(BOLD)
    assert page.evaluate("() => window.__pwned") is None
    # Hovering a cell shows the literal token in the tooltip (the hover loads Plotly,
    # which replaces the quick maps: its labels are literal too).
    page.get_by_test_id("plot-attn_weights").hover()
    expect(page.get_by_test_id("plot-attn_weights")).to_have_attribute("data-renderer", "plotly")
    assert tick_texts(page, "plot-attn_weights", "y") == expected
    drag = page.locator("[data-testid='plot-attn_weights'] .nsewdrag")
    drag.scroll_into_view_if_needed()
    box = drag.bounding_box()
    assert box is not None
    # The bottom-right cell: <b>x</b> attending to <b>x</b>.
    page.mouse.move(box["x"] + box["width"] * 0.9, box["y"] + box["height"] * 0.9)
    hover = page.locator(".hoverlayer .hovertext").first
    expect(hover).to_contain_text(BOLD)
    expect(hover).to_contain_text("value")
    assert page.locator(".hoverlayer tspan[style*='bold']").count() == 0
    assert page.evaluate("() => window.__pwned") is None


def test_markup_in_the_url_stays_text(page: Page) -> None:
    page.goto(
        "/?t=%3Cb%3Ehi%3C%2Fb%3E&t=%3Cscript%3Ewindow.__pwned%3D1%3C%2Fscript%3E"
        "&emb=%7B%22kind%22%3A%22hashed%22%2C%22dim%22%3A4%2C%22seed%22%3A0%7D"
    )
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    wait_for_plot(page, "plot-attn_weights")
    script = "<script>window.__pwned=1</script>"
    assert tick_texts(page, "plot-attn_weights") == ["<b>hi</b>", script[:13] + "…"]
    expect(page.get_by_test_id("token-chip").nth(1)).to_contain_text(script)
    expect(page.get_by_label("Or a whole sentence")).to_have_value("")
    assert page.evaluate("() => window.__pwned") is None
