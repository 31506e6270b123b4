"""The real-model page (/model) with the built-in MiniLM: its attention for every layer
and head, one token's weights in every head, [UNK], and a head step by step.
Decoders: test_model_decoders.py."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api, plot_data, tick_texts, wait_for_plot

pytestmark = [pytest.mark.e2e, pytest.mark.model]

LAYERS, HEADS = 6, 12
UINT8_ERROR = 1 / 510
# Words that are one WordPiece each, so N words make N + 2 tokens.
WORDS = (
    "the river bank was muddy after the rain and the bank approved the loan for the farm "
    "so the farmer walked down to the water with his dog"
).split()


def words(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def tokens_of(server_url: str, text: str, **extra: object) -> list[str]:
    body = {"text": text, "format": "compact", "layers": [1], **extra}
    return api(server_url, "/api/model/attention", body)["tokens"]


def wait_for_grid(page: Page, tokens: int | None = None, timeout: float = WAIT) -> None:
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", str(LAYERS * (HEADS + 2)), timeout=timeout)
    if tokens is not None:
        expect(grid).to_have_attribute("data-tokens", str(tokens), timeout=timeout)
        zoom = page.get_by_test_id("zoom-plot")
        expect(zoom).to_have_attribute("data-tokens", str(tokens), timeout=timeout)
    wait_for_plot(page, "zoom-plot")


def zoom_shows(page: Page, layer: int, head: str, tokens: int | None = None) -> None:
    """Wait until the large plot has drawn this map (its data-* are set after the draw)."""
    zoom = page.get_by_test_id("zoom-plot")
    expect(zoom).to_have_attribute("data-layer", str(layer), timeout=WAIT)
    expect(zoom).to_have_attribute("data-head", head, timeout=WAIT)
    if tokens is not None:
        expect(zoom).to_have_attribute("data-tokens", str(tokens), timeout=WAIT)


def assert_close(actual: list[list[float]], expected: list[list[float]], tol: float) -> None:
    assert actual is not None, "the plot has no data"
    assert len(actual) == len(expected)
    worst = max(
        abs(a - e)
        for ra, re_ in zip(actual, expected, strict=True)
        for a, e in zip(ra, re_, strict=True)
    )
    assert worst <= tol, f"largest difference {worst} > {tol}"


def query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def test_grid_of_every_layer_and_head(page: Page) -> None:
    page.goto("/model")
    wait_for_grid(page)
    assert page.locator("[data-testid=head-grid] [data-kind=head]").count() == LAYERS * HEADS
    assert page.locator("[data-testid=head-grid] [data-kind=mean]").count() == LAYERS
    assert page.locator("[data-testid=head-grid] [data-kind=rollout]").count() == LAYERS
    # Every thumbnail was painted (no map left grey/pending) at the token count.
    assert page.locator("[data-testid=head-grid] .map-btn.pending").count() == 0
    sizes = page.eval_on_selector_all(
        "[data-testid=head-grid] canvas", "cs => cs.map(c => c.width * 1000 + c.height)"
    )
    tokens = page.get_by_test_id("wp-token").all_text_contents()
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert set(sizes) == {len(tokens) * 1000 + len(tokens)}
    # A canvas has colour variation (it is a map, not a blank rectangle).
    distinct = page.evaluate(
        "() => { const c = document.querySelector(\"[data-testid='map-L1-H3'] canvas\");"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " const s = new Set();"
        " for (let i = 0; i < d.length; i += 4) s.add((d[i] << 16) | (d[i+1] << 8) | d[i+2]);"
        " return s.size; }"
    )
    assert distinct > 3
    assert page.evaluate("performance.getEntriesByName('model-grid-drawn').length") == 1
    expect(page.get_by_test_id("model-name")).to_have_text("sentence-transformers/all-MiniLM-L6-v2")


def test_zoomed_map_equals_the_api(page: Page, server_url: str) -> None:
    text = "The bank approved the loan because the river flooded the farm."
    page.goto("/model?" + "text=" + text.replace(" ", "+"))
    wait_for_grid(page)
    page.get_by_test_id("map-L3-H5").click()
    zoom_shows(page, 3, "5")
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 3, head 5")
    expected = api(server_url, "/api/model/attention", {"text": text, "layers": [3]})
    assert_close(plot_data(page, "zoom-plot"), expected["attentions"][0][4], UINT8_ERROR + 1e-6)
    labels = tick_texts(page, "zoom-plot", "y")
    assert labels[0] == "[CLS]" and labels[-1] == "[SEP]" and len(labels) == len(expected["tokens"])
    assert query(page)["layer"] == ["3"] and query(page)["head"] == ["5"]

    # Keyboard: arrows move the selection, and the large map follows.
    page.get_by_test_id("map-L3-H5").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    expect(page.get_by_test_id("map-L4-H6")).to_be_focused()
    expect(page.get_by_test_id("map-L4-H6")).to_have_attribute("aria-pressed", "true")
    zoom_shows(page, 4, "6")
    expected4 = api(server_url, "/api/model/attention", {"text": text, "layers": [4]})
    assert_close(plot_data(page, "zoom-plot"), expected4["attentions"][0][5], UINT8_ERROR + 1e-6)

    # The head average opens too.
    page.get_by_test_id("map-L4-mean").click()
    zoom_shows(page, 4, "mean")
    assert_close(plot_data(page, "zoom-plot"), expected4["head_average"][0], UINT8_ERROR + 1e-6)


def test_rollout(page: Page, server_url: str) -> None:
    page.goto("/model")
    wait_for_grid(page)
    text = page.get_by_test_id("model-text").input_value()
    page.get_by_test_id("map-L6-rollout").click()
    zoom_shows(page, 6, "rollout")
    expect(page.get_by_test_id("zoom-title")).to_have_text("Rollout through layer 6")
    expected = api(server_url, "/api/model/attention", {"text": text, "layers": [6]})
    z = plot_data(page, "zoom-plot")
    assert_close(z, expected["rollout"][0], UINT8_ERROR + 1e-6)
    # Rollout is not just the last layer's head average.
    assert expected["rollout"][0] != expected["head_average"][0]
    for row in z:
        assert abs(sum(row) - 1) <= len(row) * UINT8_ERROR


def test_hide_special_tokens(page: Page, server_url: str) -> None:
    text = "the river bank was muddy"
    page.goto("/model?text=" + text.replace(" ", "+") + "&layer=2&head=7")
    wait_for_grid(page, tokens=7)
    assert "[CLS]" in tick_texts(page, "zoom-plot", "x")
    page.get_by_test_id("hide-special").check()
    wait_for_grid(page, tokens=5)
    zoom_shows(page, 2, "7", tokens=5)
    expect(page.get_by_test_id("wp-token")).to_have_text(["the", "river", "bank", "was", "muddy"])
    for axis in ("x", "y"):
        labels = tick_texts(page, "zoom-plot", axis)
        assert labels == ["the", "river", "bank", "was", "muddy"], labels
    z = plot_data(page, "zoom-plot")
    for row in z:
        assert abs(sum(row) - 1) <= len(row) * UINT8_ERROR, row
    expected = api(
        server_url, "/api/model/attention", {"text": text, "layers": [2], "hide_special": True}
    )
    assert_close(z, expected["attentions"][0][6], UINT8_ERROR + 1e-6)
    assert query(page)["hide"] == ["1"]
    # The state survives a reload (once the page's word comparison is in: a reload
    # while it runs would abort it, which the page fixture counts as a failure).
    expect(page.get_by_test_id("cw-cosine")).to_have_count(LAYERS + 1, timeout=WAIT)
    page.reload()
    wait_for_grid(page, tokens=5)
    expect(page.get_by_test_id("hide-special")).to_be_checked()
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 2, head 7")
    expect(page.get_by_test_id("cw-cosine")).to_have_count(LAYERS + 1, timeout=WAIT)


def test_sentence_pair(page: Page) -> None:
    page.goto("/model")
    wait_for_grid(page)
    page.get_by_test_id("model-text").fill("the bank approved the loan")
    page.get_by_test_id("model-text-b").fill("the river was muddy")
    page.get_by_test_id("model-run").click()
    wait_for_grid(page, tokens=12)
    tokens = page.get_by_test_id("wp-token")
    assert tokens.all_text_contents().count("[SEP]") == 2
    assert page.locator("[data-testid=wp-token].seg-b").count() == 5  # river..muddy + [SEP]
    assert query(page)["text_b"] == ["the river was muddy"]


def test_512_tokens(page: Page, server_url: str) -> None:
    text = words(510)
    assert len(tokens_of(server_url, text)) == 512
    page.goto("/model")
    wait_for_grid(page)
    page.get_by_test_id("model-text").fill(text)
    page.get_by_test_id("model-run").click()
    wait_for_grid(page, tokens=512, timeout=60_000)
    # A long text: the grid is a pooled overview and the large map a canvas, fetched whole
    # at full resolution, one pixel a cell (never 512 × 512 cells handed to Plotly).
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-overview", "true")
    ready = page.get_by_test_id("canvas-zoom")
    expect(ready).to_have_attribute("data-ready", "1-1:0,512:0,512", timeout=WAIT)
    zoom = page.get_by_test_id("zoom-canvas")
    assert zoom.evaluate("c => [c.width, c.height]") == [512, 512]
    expect(page.get_by_test_id("zoom-plot")).to_be_hidden()
    expect(page.get_by_test_id("error-text")).to_be_empty()
    expect(page.get_by_test_id("token-count")).to_have_text("(512 shown)")
    sizes = page.eval_on_selector_all(
        "[data-testid=head-grid] canvas", "cs => [...new Set(cs.map(c => c.width))]"
    )
    assert sizes == [128]  # 512 tokens max-pooled 4 × 4 into each thumbnail
    # Another map opens large without trouble.
    page.get_by_test_id("map-L5-H2").click()
    zoom_shows(page, 5, "2", tokens=512)
    expect(ready).to_have_attribute("data-ready", "5-2:0,512:0,512", timeout=WAIT)


@pytest.mark.allow_console(r"422")
def test_too_long_text_shows_the_limit_by_the_input(page: Page, server_url: str) -> None:
    page.goto("/model")
    wait_for_grid(page)
    page.get_by_test_id("model-text").fill(words(520))
    page.get_by_test_id("model-run").click()
    error = page.get_by_test_id("error-text")
    expect(error).to_contain_text("522 WordPiece tokens", timeout=WAIT)
    expect(page.get_by_test_id("model-text")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("model-results")).to_have_attribute("data-stale", "true")
    expect(error).to_contain_text("512")
    expect(page.get_by_test_id("error-general")).to_be_empty()


def test_compare_word_panel(page: Page, server_url: str) -> None:
    page.goto("/model")
    cells = page.get_by_test_id("cw-cosine")
    expect(cells).to_have_count(LAYERS + 1, timeout=WAIT)
    expected = api(
        server_url,
        "/api/model/compare-word",
        {
            "text_a": "the river bank was muddy",
            "text_b": "the bank approved the loan",
            "word": "bank",
        },
    )["cosines"]
    shown = [float(t) for t in cells.all_text_contents()]
    assert shown == pytest.approx(expected, abs=6e-5)
    wait_for_plot(page, "cw-plot")
    assert plot_data(page, "cw-plot", field="y") == pytest.approx(expected, abs=1e-6)
    assert plot_data(page, "cw-plot", field="x") == list(range(LAYERS + 1))
    # Context pulls the two "bank"s apart: below the embedding-level similarity.
    assert min(expected[1:]) < expected[0]


@pytest.mark.allow_console(r"422")
def test_compare_word_error_next_to_its_field(page: Page) -> None:
    page.goto("/model")
    expect(page.get_by_test_id("cw-cosine")).to_have_count(LAYERS + 1, timeout=WAIT)
    page.get_by_test_id("cw-text-b").fill("the cat sat")
    page.get_by_test_id("cw-run").click()
    expect(page.get_by_test_id("error-cw-text_b")).to_contain_text("does not occur", timeout=WAIT)
    assert query(page)["cb"] == ["the cat sat"]


def test_token_text_is_escaped(page: Page) -> None:
    page.goto("/model?text=" + "a+%3Cb%3Ebold%3C%2Fb%3E+%26+x")
    wait_for_grid(page)
    tokens = page.get_by_test_id("wp-token").all_text_contents()
    assert "<" in tokens and "&" in tokens
    labels = tick_texts(page, "zoom-plot", "x")
    # Repeated tokens carry their position ("<·2"); the characters arrive verbatim.
    for char in ("<", ">", "&"):
        assert any(label.split("·")[0] == char for label in labels), (char, labels)
    # Plotly drew the text, not a <b> element from it.
    assert page.locator("[data-testid=zoom-plot] svg b").count() == 0
    assert not re.search(r"<b>", page.get_by_test_id("wp-tokens").inner_html())


def test_compact_decoding_in_the_browser(page: Page, server_url: str) -> None:
    """model-data.js decodes both compact dtypes to the JSON weights within their errors."""
    text = "the river bank was muddy"
    page.goto("/model")
    wait_for_grid(page)
    decoded = page.evaluate(
        """async (text) => {
            const { decodeCompact } = await import('/static/js/model-data.js');
            const out = {};
            for (const dtype of ['uint8', 'float16']) {
                const r = await fetch('/api/model/attention', {method: 'POST',
                    headers: {'content-type': 'application/json'},
                    body: JSON.stringify({text, layers: [2], format: 'compact', dtype})});
                const t = decodeCompact((await r.json()).attentions[0]);
                out[dtype] = {shape: t.shape, values: Array.from(t.values)};
            }
            return out;
        }""",
        text,
    )
    expected = api(server_url, "/api/model/attention", {"text": text, "layers": [2]})
    flat = [v for head in expected["attentions"][0] for row in head for v in row]
    for dtype, tol in (("uint8", UINT8_ERROR), ("float16", 2**-12)):
        got = decoded[dtype]
        assert got["shape"] == [HEADS, 7, 7]
        worst = max(abs(a - e) for a, e in zip(got["values"], flat, strict=True))
        assert worst <= tol + 1e-7, (dtype, worst)
    # float16 is the finer of the two.
    assert max(abs(a - e) for a, e in zip(decoded["float16"]["values"], flat, strict=True)) < (
        1 / 1000
    )


# ---------- from a token to what it reads (issue 14) ----------


def head_lines(page: Page) -> list[tuple[int, int, float]]:
    return page.locator("[data-testid='headview-lines'] line").evaluate_all(
        "ls => ls.map(l => [Number(l.dataset.head), Number(l.dataset.key),"
        " Number(l.dataset.weight)])"
    )


# The test's reload aborts what the page still asks for (a clicked cell's why, the head
# scores of a card in view, Plotly's script): by design, never a failure.
RELOAD_ABORTS = r"(/api/model/(why|head-scores)|/vendor/plotly[\w.-]*\.js) \(net::ERR_ABORTED\)$"


@pytest.mark.allow_console(RELOAD_ABORTS)
def test_a_token_shows_what_it_reads_in_every_head(page: Page, server_url: str) -> None:
    text = "the river bank was muddy"
    page.goto("/model?text=" + text.replace(" ", "+") + "&layer=3")
    wait_for_grid(page, tokens=7)
    expect(page.get_by_test_id("tv-body")).to_be_hidden()
    expect(page.get_by_test_id("tv-what")).to_contain_text("Choose a token")
    page.get_by_test_id("wp-token").nth(3).click()  # "bank"
    view = page.get_by_test_id("token-view")
    expect(view).to_have_attribute("data-token", "3", timeout=WAIT)
    expect(view).to_have_attribute("data-query", "3")
    expect(page.get_by_test_id("wp-token").nth(3)).to_have_attribute("aria-pressed", "true")
    expected = api(server_url, "/api/model/attention", {"text": text})["attentions"]
    # Every layer × every head: one row each, the API's weights from "bank".
    z = plot_data(page, "tv-strip")
    assert len(z) == LAYERS * HEADS and len(z[0]) == 7
    rows = [expected[layer][head][3] for layer in range(LAYERS) for head in range(HEADS)]
    assert_close(z, rows, UINT8_ERROR + 1e-6)
    names = [f"L{layer} H{head}" for layer in range(1, LAYERS + 1) for head in range(1, HEADS + 1)]
    labels = tick_texts(page, "tv-strip", "y")  # 72 rows: every 5th is labelled, all in hover
    assert labels[0] == "L1 H1" and labels == names[:: len(names) // len(labels) + 1]
    # The head view: layer 3 (the large map's), a line from "bank" to every token per head.
    expect(page.get_by_test_id("tv-layer")).to_have_value("3")
    expect(page.get_by_test_id("headview-query")).to_have_value("3")
    lines = head_lines(page)
    assert len(lines) == HEADS * 7
    for head, key, weight in lines:
        assert abs(weight - expected[2][head][3][key]) <= UINT8_ERROR + 1e-6
    # Another layer.
    page.get_by_test_id("tv-layer").select_option("5")
    expect(page.get_by_test_id("tv-layer-title")).to_have_text("Every head of layer 5")
    for head, key, weight in head_lines(page):
        assert abs(weight - expected[4][head][3][key]) <= UINT8_ERROR + 1e-6
    assert query(page)["tok"] == ["3"] and query(page)["tl"] == ["5"]
    # A row label of the large map chooses its token too; so does a cell (its row).
    page.locator("[data-testid='zoom-plot'] .ytick text").nth(1).click()
    expect(view).to_have_attribute("data-token", "1", timeout=WAIT)
    expect(page.get_by_test_id("wp-token").nth(1)).to_have_attribute("aria-pressed", "true")
    # The click reached for the map: Plotly takes its place (heatmap.js), then its cells.
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-renderer", "plotly")
    cells = page.locator(
        "[data-testid='zoom-plot'] .quick-cells, [data-testid='zoom-plot'] .nsewdrag"
    )
    # Choosing a token scrolled the token view into sight: back to the map.
    cells.first.scroll_into_view_if_needed()
    box = cells.first.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 5.5 / 7)
    expect(view).to_have_attribute("data-token", "5", timeout=WAIT)
    # The view survives a reload.
    page.reload()
    wait_for_grid(page, tokens=7)
    expect(view).to_have_attribute("data-token", "5", timeout=WAIT)
    expect(page.get_by_test_id("tv-layer")).to_have_value("5")


# ---------- [UNK] ----------


def test_unknown_characters_are_said_beside_the_tokens(page: Page, server_url: str) -> None:
    text = "I love 😀 pizza"
    tokens = tokens_of(server_url, text)
    assert "[UNK]" in tokens
    page.goto("/model?text=" + "I+love+%F0%9F%98%80+pizza")
    wait_for_grid(page, tokens=len(tokens))
    note = page.get_by_test_id("unk-note")
    expect(note).to_be_visible(timeout=WAIT)
    expect(note).to_contain_text("vocabulary lacks 😀", timeout=WAIT)
    expect(note).to_contain_text("[UNK]")
    unk = page.locator("[data-testid=wp-token].unk")
    expect(unk).to_have_count(1)
    expect(unk).to_have_text("[UNK]")
    # Words the vocabulary has: no notice.
    page.get_by_test_id("model-text").fill("I love pizza")
    page.get_by_test_id("model-run").click()
    wait_for_grid(page, tokens=len(tokens) - 1)
    expect(note).to_be_hidden()


# ---------- a head step by step ----------


def test_an_encoder_head_opens_step_by_step(page: Page, server_url: str) -> None:
    text, text_b = "the bank approved the loan", "the river was muddy"
    page.goto(f"/model?text={quote(text)}&text_b={quote(text_b)}&layer=4&head=2")
    wait_for_grid(page, tokens=12)
    link = page.get_by_test_id("open-head")
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    params = query(page)
    assert params["real"] == ["sentence-transformers/all-MiniLM-L6-v2"]
    assert params["text"] == [text] and params["text_b"] == [text_b]
    expected = api(
        server_url,
        "/api/model/head",
        {"text": text, "text_b": text_b, "layer": 4, "head": 2},
    )
    z = plot_data(page, "plot-attn_weights")
    assert_close(z, expected["heads"][0]["attn_weights"], 1e-6)
    expect(page.locator("[data-step='masked_scores'] .step-text")).to_contain_text(
        "An encoder masks nothing"
    )
    labels = tick_texts(page, "plot-attn_weights", "y")
    assert labels[0] == "[CLS]" and labels.count("[SEP]·6") + labels.count("[SEP]·11") == 2


def test_a_text_too_long_for_a_link_says_so(page: Page, server_url: str) -> None:
    text = " ".join(["approved"] * 240)  # 2,159 characters, 242 WordPiece tokens
    assert len(tokens_of(server_url, text)) == 242
    page.goto("/model")
    wait_for_grid(page)
    page.get_by_test_id("model-text").fill(text)
    page.get_by_test_id("model-run").click()
    wait_for_grid(page, tokens=242)
    expect(page.get_by_test_id("open-head")).to_be_hidden()
    note = page.get_by_test_id("open-head-note")
    expect(note).to_contain_text("too long for a link")
    expect(note).to_contain_text("2,000")
