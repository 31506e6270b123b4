"""How the pages draw and fit: maps before Plotly and Plotly taking over in place,
every token labelled, the weights' colour range, no cloud button, every page
within 390 px, the navigation, the explorer's fold, and the HTML 404 page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import plot_data, tick_texts, wait_for_plot

pytestmark = pytest.mark.e2e

PAGES = ["/", "/compare", "/lessons", "/model"]
NAV = ["Explorer", "Compare", "Lessons", "Real model", "API docs"]


def wait_drawn(page: Page, path: str) -> None:
    if path == "/model":
        wait_for_plot(page, "zoom-plot")
    else:
        expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))


def load_plotly(page: Page, testid: str) -> None:
    """Reach for a plot (hover): Plotly loads and takes over that plot."""
    plot = page.get_by_test_id(testid)
    plot.hover()
    # Parsing Plotly and drawing 64 × 64 cells takes seconds on a loaded 2-core machine.
    expect(plot).to_have_attribute("data-renderer", "plotly", timeout=30_000)


def use_sentence(page: Page, words: list[str]) -> None:
    """The explorer with hashed embeddings (any word) and this sentence."""
    page.goto("/")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    page.get_by_test_id("opt-embedding").select_option("hashed")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    page.get_by_test_id("sentence-input").fill(" ".join(words))
    page.get_by_test_id("sentence-use").click()
    page.wait_for_function(
        "n => { const d = document.querySelector(\"[data-testid='plot-attn_weights']\");"
        " return d && d.data && d.data[0].z.length === n; }",
        arg=len(words),
    )


# ---------- quick maps first, Plotly in place ----------


def test_maps_are_drawn_before_plotly_and_plotly_replaces_them_in_place(page: Page) -> None:
    page.goto("/")
    wait_for_plot(page, "plot-attn_weights")
    assert page.evaluate("() => window.Plotly === undefined")
    plot = page.get_by_test_id("plot-attn_weights")
    expect(plot).to_have_attribute("data-renderer", "quick")
    z_quick = plot_data(page, "plot-attn_weights")
    where = (
        "e => { const r = e.getBoundingClientRect(); return [r.top + scrollY, r.height, r.width]; }"
    )
    box = plot.evaluate(where)
    ticks_quick = tick_texts(page, "plot-attn_weights")
    assert ticks_quick == ["stream", "bank", "mud"]
    # The cells are painted: a pixel near the first cell's corner (clear of its number) is coloured.
    painted = page.evaluate(
        "() => { const c = document.querySelector(\"[data-testid='plot-attn_weights'] canvas\");"
        " const p = c.getContext('2d').getImageData(c.width * 0.05, c.height * 0.05, 1, 1).data;"
        " return p[3] === 255 && !(p[0] === 255 && p[1] === 255 && p[2] === 255); }"
    )
    assert painted
    load_plotly(page, "plot-attn_weights")
    expect(plot).to_have_attribute("data-renderer", "plotly")
    expect(plot.locator(".main-svg").first).to_be_visible()
    assert plot_data(page, "plot-attn_weights") == z_quick
    assert tick_texts(page, "plot-attn_weights") == ticks_quick
    assert plot.evaluate(where) == box  # nothing moved or resized


def test_plotly_bundle_is_the_versioned_partial_one(page: Page) -> None:
    page.goto("/")
    wait_for_plot(page, "plot-x")
    with page.expect_response(re.compile(r"/vendor/plotly-")) as info:
        page.get_by_test_id("plot-x").hover()
    response = info.value
    assert re.search(r"/vendor/plotly-cartesian-\d+\.\d+\.\d+\.min\.js$", response.url)
    assert "immutable" in response.headers["cache-control"]


# ---------- every token named; colour range ----------


@pytest.mark.parametrize("count", [30, 64])
def test_every_token_is_labelled(page: Page, count: int) -> None:
    """Every row is labelled (the map grows taller); columns too narrow for a label each
    are labelled every few (the map fits its panel, issue 24.6), the same in Plotly."""
    words = [f"w{i}" for i in range(count)]
    use_sentence(page, words)
    assert tick_texts(page, "plot-attn_weights", "y") == words
    assert tick_texts(page, "plot-q", "y") == words
    columns = tick_texts(page, "plot-attn_weights", "x")
    step = int(columns[1][1:]) if len(columns) > 1 else 1
    assert columns == words[::step] and len(columns) >= 8, columns
    load_plotly(page, "plot-attn_weights")
    assert tick_texts(page, "plot-attn_weights", "y") == words
    assert tick_texts(page, "plot-attn_weights", "x") == columns
    # Plotly draws every label: none hidden for overlap.
    hidden = page.eval_on_selector_all(
        "[data-testid='plot-attn_weights'] :is(.xtick, .ytick) text",
        "els => els.filter(e => getComputedStyle(e).display === 'none'"
        " || e.style.opacity === '0').length",
    )
    assert hidden == 0
    # No page overflow, and no plot wider than its panel.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    plot = page.get_by_test_id("plot-attn_weights")
    assert plot.evaluate("d => d.scrollWidth <= d.clientWidth + 1")


def colour_bar(page: Page, testid: str) -> tuple[float, float, str]:
    return page.evaluate(
        "id => { const t = document.querySelector(`[data-testid='${id}']`).data[0];"
        " return [t.zmin, t.zmax, t.colorbar.title.text]; }",
        testid,
    )


def test_weights_colour_range_fixed_or_fitted(page: Page) -> None:
    use_sentence(page, [f"w{i}" for i in range(30)])
    zmin, zmax, title = colour_bar(page, "plot-attn_weights")
    assert (zmin, zmax, title) == (0, 1, "0–1 fixed")
    # The quick renderer states it on the colour bar too.
    expect(page.locator("[data-testid='plot-attn_weights'] .cbtitle")).to_have_text("0–1 fixed")
    scores_before = plot_data(page, "plot-attn_scores")
    page.get_by_test_id("weight-range").select_option("fitted")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-attn_weights']\").data[0].zmax < 1"
    )
    z = plot_data(page, "plot-attn_weights")
    values = [v for row in z for v in row if v is not None]
    zmin, zmax, title = colour_bar(page, "plot-attn_weights")
    assert (zmin, zmax) == (min(values), max(values))
    # "fitted: 0.012–0.905" (3 decimals, or 2 significant digits below 0.01)
    match = re.fullmatch(r"fitted: (\S+)–(\S+)", title)
    assert match, title
    lo, hi = (float(g) for g in match.groups())
    assert lo == pytest.approx(min(values), rel=0.05, abs=5e-4)
    assert hi == pytest.approx(max(values), rel=0.05, abs=5e-4)
    expect(page.locator("[data-testid='plot-attn_weights'] .cbtitle")).to_have_text(title)
    assert plot_data(page, "plot-attn_scores") == scores_before  # signed maps untouched
    load_plotly(page, "plot-attn_weights")
    assert colour_bar(page, "plot-attn_weights")[2] == title
    expect(page.locator("[data-testid='plot-attn_weights'] .cbtitle")).to_have_text(title)
    page.get_by_test_id("weight-range").select_option("fixed")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-attn_weights']\").data[0].zmax === 1"
    )
    expect(page.locator("[data-testid='plot-attn_weights'] .cbtitle")).to_have_text("0–1 fixed")


# ---------- no cloud button ----------


@pytest.mark.parametrize("path", PAGES)
def test_no_share_button_on_any_plot(page: Page, path: str) -> None:
    page.goto(path)
    wait_drawn(page, path)
    plots = page.locator(".plot[data-renderer]:visible")
    assert plots.count() >= 1
    for i in range(plots.count()):
        plots.nth(i).hover()  # Plotly takes over the plot reached for, with its toolbar
        expect(plots.nth(i)).to_have_attribute("data-renderer", "plotly")
        plots.nth(i).hover()
        modebar = plots.nth(i).locator(".modebar")
        titles = modebar.locator(".modebar-btn").evaluate_all(
            "els => els.map(e => e.getAttribute('data-title'))"
        )
        assert not [t for t in titles if re.search(r"share|cloud|chart studio", t or "", re.I)]
        assert "Download plot as SVG" in titles
        assert any(re.search(r"png", t or "", re.I) for t in titles)
        assert any(re.search(r"json", t or "", re.I) for t in titles)
        assert modebar.locator("[data-attr='sendChartToCloud']").count() == 0


# ---------- 390 px ----------


@pytest.fixture
def narrow(browser: Browser, server_url: str):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, base_url=server_url, device_scale_factor=2
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    yield page
    context.close()
    assert not errors, errors


@pytest.mark.parametrize("path", [*PAGES, "/no-such-page"])
def test_no_page_overflows_at_390(narrow: Page, path: str) -> None:
    narrow.goto(path)
    if path != "/no-such-page":
        wait_drawn(narrow, path)
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    # Every plot fits the width (its own box; a very wide map scrolls inside it).
    rights = narrow.eval_on_selector_all(
        ".plot:not([hidden])", "els => els.map(e => e.getBoundingClientRect().right)"
    )
    assert all(r <= 390 for r in rights), rights


@pytest.mark.parametrize("path", PAGES)
def test_every_nav_link_is_reachable_at_390(narrow: Page, path: str) -> None:
    narrow.goto(path)
    nav = narrow.get_by_role("navigation", name="Pages")
    for name in NAV:
        link = nav.get_by_role("link", name=name, exact=True)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (name, box)
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    nav.get_by_role("link", name="Real model", exact=True).click()
    expect(narrow).to_have_url(re.compile(r"/model"))


# ---------- the explorer's fold ----------


@pytest.fixture
def wide(browser: Browser, server_url: str):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=server_url)
    page = context.new_page()
    yield page
    context.close()


def test_picking_an_example_at_1440_changes_what_is_in_view(wide: Page) -> None:
    wide.goto("/")
    expect(wide.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    button = wide.get_by_test_id("preset-next-day-rand")
    assert button.is_visible()
    button.click()
    wide.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-attn_weights']\").data[0].z.length === 5"
    )
    assert wide.evaluate("window.scrollY") == 0  # nothing scrolled: it was all in view
    expect(wide.get_by_test_id("token-chips").locator("li")).to_have_count(5)
    in_view = wide.eval_on_selector_all(
        ".pipeline .plot",
        "els => els.filter(e => { const r = e.getBoundingClientRect();"
        " return r.top >= 0 && r.top + 150 <= innerHeight && r.right <= innerWidth; }).length",
    )
    assert in_view >= 2
    chips = wide.get_by_test_id("token-chips").bounding_box()
    assert chips is not None and chips["y"] + chips["height"] <= 900


# ---------- HTML 404 ----------


@pytest.mark.allow_console("404")
def test_unknown_page_is_an_html_404_with_the_navigation(page: Page) -> None:
    response = page.goto("/no-such-page")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.get_by_test_id("missing-path")).to_have_text("/no-such-page")
    nav = page.get_by_role("navigation", name="Pages")
    for name in NAV:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    nav.get_by_role("link", name="Explorer", exact=True).click()
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))


def test_plotly_events_asked_for_before_plotly_arrive_with_it(page: Page) -> None:
    """/model registers a plotly_hover handler on its large map while the quick
    figure is shown; it works once Plotly takes over."""
    page.goto("/model")
    wait_for_plot(page, "zoom-plot")
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-renderer", "quick")
    load_plotly(page, "zoom-plot")
    drag = page.locator("[data-testid='zoom-plot'] .nsewdrag")
    box = drag.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.mouse.move(box["x"] + box["width"] * 0.52, box["y"] + box["height"] * 0.52)
    expect(page.get_by_test_id("zoom-readout")).to_contain_text("→")
