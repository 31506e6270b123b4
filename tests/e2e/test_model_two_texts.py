"""/model's "Two texts, one head": one head's map for two texts (or one text in two
checkpoints of one family), side by side, and B − A on a diverging scale, equal to
the API's maps; texts of different token counts get the two maps and the reason
there is no difference.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import ARTIFACTS, api, plot_data, wait_for_plot, watched_page
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

A = "the river bank was muddy"
B = "the money bank was closed"  # MiniLM: 7 tokens each
LONGER = "the money bank was closed after the rain"


def head_map(server: str, text: str, layer: int, head: int, model: str | None = None) -> list:
    body = {"text": text, "layers": [layer], "heads": [head], "pool": 128}
    if model:
        body["model"] = model
    return api(server, "/api/model/attention", body)["attentions"][0][0]


def close(actual: list, expected: list, tol: float = 1e-6) -> None:
    assert len(actual) == len(expected)
    for row_a, row_e in zip(actual, expected, strict=True):
        assert len(row_a) == len(row_e)
        for a, e in zip(row_a, row_e, strict=True):
            assert (a is None and e is None) or abs(a - e) <= tol


def compare(page: Page, text_b: str, layer: int, head: int) -> None:
    card = page.get_by_test_id("two-texts")
    page.get_by_test_id("tt-text-b").fill(text_b)
    page.get_by_test_id("tt-layer").fill(str(layer))
    page.get_by_test_id("tt-head").fill(str(head))
    page.get_by_test_id("tt-run").click()
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)


def test_two_texts_side_by_side_and_their_difference(page: Page, server_url: str) -> None:
    page.goto(f"/model?text={quote(A)}&layer=2&head=3")
    expect(page.get_by_test_id("tt-text-a")).to_have_value(A)
    expect(page.get_by_test_id("tt-layer")).to_have_value("2")
    compare(page, B, 2, 3)
    map_a, map_b = head_map(server_url, A, 2, 3), head_map(server_url, B, 2, 3)
    for key in ("a", "b", "diff"):
        wait_for_plot(page, f"tt-plot-{key}")
    close(plot_data(page, "tt-plot-a"), map_a)
    close(plot_data(page, "tt-plot-b"), map_b)
    diff = [
        [b - a for a, b in zip(ra, rb, strict=True)] for ra, rb in zip(map_a, map_b, strict=True)
    ]
    close(plot_data(page, "tt-plot-diff"), diff)
    colours = plot_data(page, "tt-plot-diff", field="colorscale")
    assert colours[0][1] == "#0571b0" and colours[-1][1] == "#ca0020"  # diverging, 0 white
    assert plot_data(page, "tt-plot-diff", field="zmid") == 0
    expect(page.get_by_test_id("tt-title-diff")).to_contain_text("B − A")
    note = page.get_by_test_id("tt-note")
    expect(note).to_contain_text("differ at positions 2, 5")  # river/money, muddy/closed
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("two-texts").screenshot(path=str(ARTIFACTS / "two_texts_1440.png"))

    # Different token counts: the two maps, no difference, and why.
    compare(page, LONGER, 2, 3)
    expect(page.get_by_test_id("tt-panel-diff")).to_be_hidden()
    expect(note).to_contain_text("A has 7 tokens and B 10")
    expect(note).to_contain_text("cell by cell")
    close(plot_data(page, "tt-plot-b"), head_map(server_url, LONGER, 2, 3))


def test_two_texts_fit_390_px(narrow: Page) -> None:
    narrow.goto(f"/model?text={quote(A)}&layer=2&head=3")
    expect(narrow.get_by_test_id("tt-text-a")).to_have_value(A)
    compare(narrow, B, 2, 3)
    wait_for_plot(narrow, "tt-plot-diff")
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    ARTIFACTS.mkdir(exist_ok=True)
    narrow.get_by_test_id("two-texts").screenshot(path=str(ARTIFACTS / "two_texts_390.png"))


@pytest.mark.allow_console("422")
def test_a_head_out_of_range_is_said(page: Page) -> None:
    page.goto(f"/model?text={quote(A)}")
    expect(page.get_by_test_id("tt-text-a")).to_have_value(A)
    page.get_by_test_id("tt-head").fill("99")
    page.get_by_test_id("tt-run").click()
    expect(page.get_by_test_id("tt-error")).to_contain_text("heads", timeout=WAIT)


@pytest.mark.allow_console("422")
def test_a_text_past_the_servers_limit_is_sent_and_its_limit_said(page: Page) -> None:
    """No cap of the page's own: the server's, which follows the model's token limit."""
    page.goto(f"/model?text={quote(A)}")
    expect(page.get_by_test_id("tt-text-a")).to_have_value(A)
    long = "x" * 50_000
    page.get_by_test_id("tt-text-b").fill(long)
    assert len(page.get_by_test_id("tt-text-b").input_value()) == len(long)
    page.get_by_test_id("tt-run").click()
    error = page.get_by_test_id("tt-error")
    expect(error).to_contain_text("text is 50000 characters; the limit is", timeout=WAIT)
    expect(error).to_contain_text("16 characters a token")


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two checkpoints of one family with one tokenizer (two 'training snapshots')."""
    require("transformers")
    root = tmp_path_factory.mktemp("snapshots")
    make_gpt2(root / "snap-100", seed=1)
    make_gpt2(root / "snap-200", seed=2)
    with models_server(root) as url:
        yield url


def test_two_checkpoints_one_text(browser: Browser, snapshots: str, tmp_path: Path) -> None:
    with watched_page(browser, snapshots, viewport={"width": 1280, "height": 900}) as page:
        text = "the cat sat on the mat"
        page.goto(f"/model?model=snap-100&text={quote(text)}")
        expect(page.get_by_test_id("tt-text-a")).to_have_value(text)
        page.get_by_test_id("tt-model-b").select_option("snap-200")
        compare(page, "", 1, 2)  # B's text empty: text A again
        wait_for_plot(page, "tt-plot-diff")
        first = head_map(snapshots, text, 1, 2, "snap-100")
        second = head_map(snapshots, text, 1, 2, "snap-200")
        expected = [
            [None if a is None or b is None else b - a for a, b in zip(ra, rb, strict=True)]
            for ra, rb in zip(first, second, strict=True)
        ]
        close(plot_data(page, "tt-plot-diff"), expected)
        expect(page.get_by_test_id("tt-title-b")).to_contain_text("snap-200")
        # B's model is kept in the URL: a reload compares the two checkpoints again.
        assert query(page.url)["ttm"] == "snap-200"
        page.reload()
        expect(page.get_by_test_id("two-texts")).to_have_attribute(
            "data-ready", "true", timeout=WAIT
        )
        expect(page.get_by_test_id("tt-model-b")).to_have_value("snap-200")
        wait_for_plot(page, "tt-plot-diff")
        close(plot_data(page, "tt-plot-diff"), expected)


def test_a_comparison_is_kept_in_the_url(browser: Browser, server_url: str) -> None:
    """The card's inputs go into the URL when compared (text A only when it is not the
    page's text); a reload, or the link opened in a new browser, shows the same maps."""
    with watched_page(browser, server_url, viewport={"width": 1440, "height": 900}) as page:
        page.goto(f"/model?text={quote(A)}&layer=2&head=3")
        expect(page.get_by_test_id("tt-text-a")).to_have_value(A)
        compare(page, B, 1, 4)
        expect(page).to_have_url(re.compile(r"[?&]tt=1&"))
        kept = {"text": A, "layer": "2", "head": "3", "tt": "1", "ttb": B, "ttl": "1", "tth": "4"}
        assert query(page.url) == kept
        page.get_by_test_id("tt-text-a").fill(LONGER)
        compare(page, A, 1, 4)
        assert query(page.url) == {**kept, "tta": LONGER, "ttb": A}
        link = page.url
        page.reload()
        restored(page, LONGER, A, server_url)
    # A shared link: a new browser context (nothing kept but the URL).
    with watched_page(browser, server_url, viewport={"width": 390, "height": 844}) as page:
        page.goto(link)
        restored(page, LONGER, A, server_url)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        ARTIFACTS.mkdir(exist_ok=True)
        page.get_by_test_id("two-texts").screenshot(path=str(ARTIFACTS / "two_texts_url_390.png"))


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def restored(page: Page, text_a: str, text_b: str, server_url: str) -> None:
    """The card holds the comparison of text_a and text_b (layer 1, head 4), drawn."""
    card = page.get_by_test_id("two-texts")
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    expect(page.get_by_test_id("tt-text-a")).to_have_value(text_a)
    expect(page.get_by_test_id("tt-text-b")).to_have_value(text_b)
    expect(page.get_by_test_id("tt-layer")).to_have_value("1")
    expect(page.get_by_test_id("tt-head")).to_have_value("4")
    expect(page.get_by_test_id("model-text")).to_have_value(A)  # the page's own text
    wait_for_plot(page, "tt-plot-b")
    close(plot_data(page, "tt-plot-a"), head_map(server_url, text_a, 1, 4))
    close(plot_data(page, "tt-plot-b"), head_map(server_url, text_b, 1, 4))
    expect(page.get_by_test_id("tt-note")).to_contain_text("A has 10 tokens and B 7")
