"""Several query tokens at once on /model: shift- or ctrl-click (or "Select several" and
the keyboard) chooses them, chips list them, and the token view shows their rows
averaged or summed, equal to the API's maps; the choice is in the URL.  A decoder's
tokens read different numbers of keys: a shorter row counts 0 past its end.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import ARTIFACTS, api, plot_data, watched_page
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

UINT8_ERROR = 1 / 510
TEXT = "the river bank was muddy after the rain"  # MiniLM: 10 tokens, [CLS] and [SEP] included
GPT = "tiny-gpt"
GPT_TEXT = "the cat sat on the mat and looked at the dog"
LONG_GPT = "tiny-gpt-512"
FLOAT16 = 1 / 1000  # a long text's rows come as float16


@pytest.fixture(scope="module")
def gpt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require("transformers")
    root = tmp_path_factory.mktemp("multi-token")
    make_gpt2(root / GPT)
    make_gpt2(root / LONG_GPT, n_positions=512)
    with models_server(root) as url:
        yield url


@pytest.fixture
def gpt_page(browser: Browser, gpt_server: str) -> Iterator[Page]:
    """A page on the GPT-2's server that fails its test on any page or console error."""
    with watched_page(browser, gpt_server, viewport={"width": 1280, "height": 900}) as page:
        yield page


def combined(
    maps: list, queries: list[int], combine: str, causal: bool = False
) -> list[list[float]]:
    """Every layer × head: the rows of ``queries`` summed (or averaged), shorter rows
    (a decoder's token reads keys 0..q) padded with 0 (the oracle the page must equal)."""
    out = []
    for layer in maps:
        for head in layer:
            rows = [[v or 0.0 for v in head[q][: q + 1 if causal else None]] for q in queries]
            keys = max(len(r) for r in rows)
            total = [sum(r[j] if j < len(r) else 0.0 for r in rows) for j in range(keys)]
            out.append(total if combine == "sum" else [v / len(rows) for v in total])
    return out


def assert_rows(actual: list[list[float]], expected: list[list[float]], tol: float) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert len(a) == len(e)
        assert max(abs(x - y) for x, y in zip(a, e, strict=True)) <= tol


# The quick renderer's large map: the y tick label inside each outlined row, top to bottom.
MARKED_LABELS = """() => {
  const plot = document.querySelector("[data-testid='zoom-plot']");
  const labels = [...plot.querySelectorAll('.ytick text')];
  return [...plot.querySelectorAll('.quick-shape')].map((shape) => {
    const b = shape.getBoundingClientRect();
    const inside = labels.filter((t) => {
      const r = t.getBoundingClientRect();
      const y = r.top + r.height / 2;
      return y > b.top && y < b.bottom;
    });
    return inside.map((t) => t.textContent).join('|');
  });
}"""
TOKEN_LABELS = ["[CLS]", "the·1", "river", "bank", "was", "muddy", "after", "the·7", "rain"]


def drawn(page: Page, queries: str, combine: str) -> None:
    view = page.get_by_test_id("token-view")
    expect(view).to_have_attribute("data-drawn-tokens", f"{queries}:{combine}", timeout=WAIT)


def test_several_tokens_averaged_and_summed(page: Page, server_url: str) -> None:
    page.goto(f"/model?text={quote(TEXT)}&layer=2")
    tokens = page.get_by_test_id("wp-token")
    expect(tokens).to_have_count(10, timeout=WAIT)
    tokens.nth(3).click()
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-token", "3", timeout=WAIT)
    tokens.nth(5).click(modifiers=["Shift"])
    tokens.nth(8).click(modifiers=["Control"])
    drawn(page, "3,5,8", "mean")
    chips = page.get_by_test_id("tv-chip")
    expect(chips).to_have_count(3)
    expect(chips.nth(1)).to_contain_text("muddy·5")
    for i in (3, 5, 8):
        expect(tokens.nth(i)).to_have_attribute("aria-pressed", "true")
    maps = api(server_url, "/api/model/attention", {"text": TEXT})["attentions"]
    assert_rows(plot_data(page, "tv-strip"), combined(maps, [3, 5, 8], "mean"), UINT8_ERROR)
    # The large map outlines the three rows: each outline around its row's label.
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-marked", "3,5,8")
    assert page.evaluate(MARKED_LABELS) == [TOKEN_LABELS[i] for i in (3, 5, 8)]
    expect(page.get_by_test_id("tv-what")).to_contain_text(
        "What 3 tokens read, their rows averaged"
    )
    page.get_by_test_id("tv-combine-sum").check()
    drawn(page, "3,5,8", "sum")
    assert_rows(plot_data(page, "tv-strip"), combined(maps, [3, 5, 8], "sum"), 3 * UINT8_ERROR)
    # The head view: one line per head and key, layer 2's summed weights.
    lines = page.locator("[data-testid='headview-lines'] line").evaluate_all(
        "ls => ls.map(l => [Number(l.dataset.head), Number(l.dataset.key),"
        " Number(l.dataset.weight)])"
    )
    sums = combined([maps[1]], [3, 5, 8], "sum")
    assert len(lines) == 12 * 10
    for head, key, weight in lines:
        assert abs(weight - sums[head][key]) <= 3 * UINT8_ERROR
    query = parse_qs(urlsplit(page.url).query)
    assert query["toks"] == ["3,5,8"] and query["comb"] == ["sum"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("token-view").scroll_into_view_if_needed()
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.get_by_test_id("token-view").screenshot(
            path=str(ARTIFACTS / f"multi_token_{width}.png")
        )
        page.get_by_test_id("zoom-card").screenshot(
            path=str(ARTIFACTS / f"multi_token_map_{width}.png")
        )
    page.set_viewport_size({"width": 1280, "height": 900})

    # The link restores it; a chip removes its token.
    page.reload()
    drawn(page, "3,5,8", "sum")
    page.get_by_test_id("tv-chip").nth(0).click()
    drawn(page, "5,8", "sum")
    assert_rows(plot_data(page, "tv-strip"), combined(maps, [5, 8], "sum"), 2 * UINT8_ERROR)
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-marked", "5,8")
    page.get_by_test_id("tv-clear").click()
    expect(page.get_by_test_id("tv-chip")).to_have_count(0)
    expect(page.get_by_test_id("token-view")).to_have_attribute(
        "data-drawn-tokens", "", timeout=WAIT
    )


def test_several_tokens_by_keyboard(page: Page) -> None:
    page.goto(f"/model?text={quote(TEXT)}")
    tokens = page.get_by_test_id("wp-token")
    expect(tokens).to_have_count(10, timeout=WAIT)
    toggle = page.get_by_test_id("tv-several")
    toggle.focus()
    page.keyboard.press("Space")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    for i in (2, 4):
        tokens.nth(i).focus()
        page.keyboard.press("Enter")
    drawn(page, "2,4", "mean")
    page.get_by_test_id("tv-combine-sum").focus()
    page.keyboard.press("Space")
    drawn(page, "2,4", "sum")


def test_a_decoders_tokens_read_different_lengths(gpt_page: Page, gpt_server: str) -> None:
    page = gpt_page
    page.goto(f"/model?model={GPT}&text={quote(GPT_TEXT)}")
    maps = api(gpt_server, "/api/model/attention", {"model": GPT, "text": GPT_TEXT})["attentions"]
    tokens = page.get_by_test_id("wp-token")
    expect(tokens).to_have_count(len(maps[0][0]), timeout=WAIT)
    tokens.nth(1).click()
    tokens.nth(6).click(modifiers=["Shift"])
    drawn(page, "1,6", "mean")
    # Token 1 reads 2 keys, token 6 reads 7: the strip is 7 keys wide.
    assert_rows(
        plot_data(page, "tv-strip"), combined(maps, [1, 6], "mean", causal=True), UINT8_ERROR
    )
    expect(page.get_by_test_id("tv-what")).to_contain_text("the keys after it count 0")


def test_a_long_texts_tokens_are_asked_for_one_by_one(gpt_page: Page, gpt_server: str) -> None:
    """Past 128 tokens the page holds pooled maps only: each chosen token's row is asked
    for at full resolution, and the rows are combined on the page."""
    page = gpt_page
    text = " ".join([GPT_TEXT] * 12)  # 265 tokens
    page.goto(f"/model?model={LONG_GPT}&text={quote(text)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-overview", "true", timeout=WAIT
    )
    tokens = page.get_by_test_id("wp-token")
    tokens.nth(150).click()
    tokens.nth(240).click(modifiers=["Shift"])
    drawn(page, "150,240", "mean")
    rows = {}
    for q in (150, 240):
        body = {"model": LONG_GPT, "text": text, "rows": [q, q + 1], "cols": [0, q + 1]}
        rows[q] = api(gpt_server, "/api/model/attention", body)["attentions"]  # (L)(H, 1, q+1)
    expected = []
    for layer in range(2):
        for head in range(4):
            a, b = rows[150][layer][head][0], rows[240][layer][head][0]
            expected.append([((a[j] if j < len(a) else 0.0) + b[j]) / 2 for j in range(len(b))])
    assert_rows(plot_data(page, "tv-strip"), expected, FLOAT16)
    # The canvas map outlines rows 150 and 240 where they are: at 150/T and 240/T of its
    # height.
    T = int(page.get_by_test_id("head-grid").get_attribute("data-tokens") or 0)
    marks = page.get_by_test_id("zoom-marks")
    expect(marks).to_have_attribute("data-rows", "150,240")
    canvas = page.get_by_test_id("zoom-canvas").bounding_box()
    assert canvas is not None
    for q, mark in zip((150, 240), marks.locator(".row-mark").all(), strict=True):
        box = mark.bounding_box()
        assert box is not None
        centre = box["y"] + box["height"] / 2
        assert abs(centre - (canvas["y"] + canvas["height"] * (q + 0.5) / T)) <= 1.5
        assert abs(box["width"] - canvas["width"]) <= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("zoom-card").screenshot(path=str(ARTIFACTS / "multi_token_long_map.png"))
    # A region of rows 200-T: only row 240 is in it.
    for name, value in (("row0", 200), ("row1", T), ("col0", 0), ("col1", T)):
        page.get_by_test_id(f"zoom-{name}").fill(str(value))
    page.get_by_test_id("zoom-apply").click()
    expect(marks).to_have_attribute("data-rows", "240", timeout=WAIT)
