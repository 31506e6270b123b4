"""The explorer as a reader meets it (issues 14 and 15): typing any sentence, errors beside
their control with stale plots, [UNK] words, the token limit and short URLs, editable
cross-attention sources, and the head view."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import api, assert_matrix_close, plot_data, tick_texts, wait_for_plot
from tests.e2e.explorer_page import embeddings_unavailable, open_explorer, wait_ready

pytestmark = pytest.mark.e2e

SENTENCE = "the cat sat on the mat because it was tired"


def weights_shape(page: Page, rows: int, cols: int) -> None:
    page.wait_for_function(
        "([r, c]) => { const d = document.querySelector(\"[data-testid='plot-attn_weights']\");"
        " return d && d.data && d.data[0].z.length === r && d.data[0].z[0].length === c; }",
        arg=[rows, cols],
    )


def weights_rows(page: Page, n: int) -> None:
    page.wait_for_function(
        "n => { const d = document.querySelector(\"[data-testid='plot-attn_weights']\");"
        " return d && d.data && d.data[0].z.length === n; }",
        arg=n,
    )


# ---------- 1. any sentence just works ----------


@pytest.mark.model
def test_typed_sentence_gets_heatmaps_without_a_number(page: Page, server_url: str) -> None:
    open_explorer(page)
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill(SENTENCE)
    sentence.press("Enter")
    wait_ready(page, timeout=60_000)
    weights_rows(page, 10)
    assert tick_texts(page, "plot-attn_weights", "y")[:3] == ["the·0", "cat", "sat"]
    # The notice says which vectors were chosen, and offers the other ways.
    notice = page.get_by_test_id("embedding-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("MiniLM's word vector")
    # x is T × 256: the 384-wide vectors are projected, and the notice says so.
    expect(notice).to_contain_text("its 384 numbers projected to this page's 256")
    expect(notice).to_contain_text("random 384 × 256 matrix")
    expect(notice).to_contain_text("cat")
    expect(notice.get_by_test_id("own-vectors")).to_be_visible()
    expect(page.get_by_label("Embedding", exact=True)).to_have_value("model")
    expect(page.get_by_test_id("unknown-words")).to_be_hidden()
    for box in ("error-tokens", "error-embedding", "error-general"):
        expect(page.get_by_test_id(box)).to_be_empty()
    expect(page.get_by_test_id("stale-note")).to_be_hidden()
    # The plots are the API's for MiniLM's vectors of those words.
    x = plot_data(page, "plot-x")
    assert len(x) == 10 and all(len(row) == 256 for row in x)
    vectors = api(server_url, "/api/model/embeddings", {"words": ["cat", "tired"]})["vectors"]
    assert len(vectors[0]) == 384  # narrowed to the server's 256 by a fixed projection
    expected = api(
        server_url,
        "/api/attention",
        {
            "tokens": SENTENCE.split(),
            "embedding": {"kind": "explicit", "vectors": x},
            "scale": "none",
        },
    )
    assert_matrix_close(plot_data(page, "plot-attn_weights"), expected["heads"][0]["attn_weights"])


@pytest.mark.model
def test_own_vectors_and_hashed_stay_available(page: Page) -> None:
    open_explorer(page)
    page.get_by_label("Add a word").fill("river")
    page.get_by_label("Add a word").press("Enter")
    wait_ready(page, timeout=60_000)
    weights_rows(page, 4)
    notice = page.get_by_test_id("embedding-notice")
    expect(notice).to_contain_text("river")
    # The explicit-vector option: back to the toy vocabulary, one vector to type.
    notice.get_by_test_id("own-vectors").click()
    row = page.get_by_test_id("unknown-row")
    expect(row).to_contain_text("river")
    expect(page.get_by_test_id("error-tokens")).to_contain_text("Add a vector")
    expect(page.get_by_test_id("stale-note")).to_be_visible()
    row.get_by_label("river: component 1").fill("2")
    row.get_by_test_id("add-vector").click()
    wait_ready(page)
    expect(page.get_by_label("Embedding", exact=True)).to_have_value("vocabulary")
    expect(page.get_by_test_id("unknown-words")).to_be_hidden()
    assert plot_data(page, "plot-x")[3] == [2, 0.5, 0.5, 0.5]
    # Adding another unknown word now keeps the reader's own vectors.
    page.get_by_label("Add a word").fill("delta")
    page.get_by_label("Add a word").press("Enter")
    expect(page.get_by_test_id("unknown-row")).to_contain_text("delta")
    expect(page.get_by_label("Embedding", exact=True)).to_have_value("vocabulary")


@pytest.mark.allow_console(r"status of 503|^503$")
def test_sentence_falls_back_to_hashed_vectors_without_the_model(page: Page) -> None:
    embeddings_unavailable(page)
    open_explorer(page)
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill(SENTENCE)
    sentence.press("Enter")
    wait_ready(page)
    weights_rows(page, 10)
    expect(page.get_by_label("Embedding", exact=True)).to_have_value("hashed")
    notice = page.get_by_test_id("embedding-notice")
    expect(notice).to_contain_text("hashed vector")
    expect(notice).to_contain_text("not available")
    expect(page.get_by_test_id("error-embedding")).to_be_empty()


# ---------- 3. errors beside their control; the old plots marked stale ----------


def test_impossible_heads_marks_plots_stale_beside_the_control(page: Page) -> None:
    open_explorer(page)
    before = plot_data(page, "plot-attn_weights")
    heads = page.get_by_label("Heads", exact=True)
    heads.fill("3")  # 4-wide vectors cannot split into 3 heads
    heads.press("Enter")
    error = page.get_by_test_id("error-num_heads")
    expect(error).to_have_text(
        "3 heads cannot split a query/key width of 4 evenly: "
        "choose 1, 2 or 4 heads, or change d_out."
    )
    expect(heads).to_have_attribute("aria-invalid", "true")
    expect(heads).to_be_focused()  # the reader keeps typing where they were
    pipeline = page.get_by_test_id("pipeline")
    expect(pipeline).to_have_attribute("data-stale", "true")
    stale = page.get_by_test_id("stale-note")
    expect(stale).to_be_visible()
    expect(stale).to_contain_text("Out of date")
    # Screen readers: the plots' region is described by the stale note.
    expect(pipeline).to_have_attribute("aria-describedby", "pipeline-stale")
    expect(page.get_by_test_id("plot-attn_weights")).to_have_css("opacity", "0.35")  # dimmed
    assert plot_data(page, "plot-attn_weights") == before  # nothing redrawn
    expect(page.get_by_test_id("error-options")).to_be_empty()
    # A legal value clears it all.
    heads.fill("2")
    heads.press("Enter")
    expect(page.get_by_test_id("head-tab-1")).to_be_visible()
    wait_ready(page)
    expect(error).to_be_empty()
    expect(pipeline).not_to_have_attribute("data-stale", "true")
    expect(heads).not_to_have_attribute("aria-invalid", "true")
    expect(stale).to_be_hidden()


@pytest.mark.allow_console(r"status of 422|^422$")
def test_server_errors_are_plain_words_beside_their_field(page: Page) -> None:
    """An answer the page cannot foresee (a pydantic rule) lands by its control, reworded."""

    def break_seed(route) -> None:
        body = route.request.post_data_json
        body["projection"]["seed"] = -5  # what pydantic answers "Input should be …" for
        route.continue_(post_data=__import__("json").dumps(body))

    open_explorer(page, "?preset=next-day-rand")
    page.route("**/api/attention", break_seed)
    page.get_by_label("Causal mask (no looking ahead)").click()
    error = page.get_by_test_id("error-proj_seed")
    expect(error).to_have_text("Projection seed must be at least 0.")
    expect(page.get_by_label("Projection seed")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("pipeline")).to_have_attribute("data-stale", "true")
    assert "Input should be" not in page.locator("main").inner_text()


# ---------- 4. words MiniLM does not know ----------


@pytest.mark.model
def test_unknown_to_the_model_is_said_next_to_the_tokens(page: Page) -> None:
    open_explorer(page)
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill("🙂 bank 猫 <b>x</b>")
    sentence.press("Enter")
    wait_ready(page, timeout=60_000)
    note = page.get_by_test_id("unk-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("[UNK]")
    expect(note.locator("code")).to_have_text(["🙂", "猫", "[UNK]"])
    chips = page.get_by_test_id("token-chip")
    expect(chips).to_have_count(4)
    expect(chips.nth(0)).to_have_class(re.compile("chip-marked"))
    expect(chips.nth(1)).not_to_have_class(re.compile("chip-marked"))
    expect(chips.nth(2)).to_have_class(re.compile("chip-marked"))
    # Markup in a token stays text.
    expect(chips.nth(3).get_by_test_id("token-chip-choose")).to_have_text("<b>x</b>")
    assert page.locator("[data-testid='token-chips'] b").count() == 0


# ---------- 7. 5,000 pasted words stop at the limit; short, reproducible URLs ----------


def test_pasting_5000_words_stops_at_the_limit(page: Page, browser, server_url: str) -> None:
    open_explorer(page)
    words = " ".join(["bank", "stream", "mud", "money", "loan"] * 1000)
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill(words)
    expect(page.get_by_test_id("sentence-count")).to_contain_text("5,000 words")
    sentence.press("Enter")
    wait_ready(page)
    weights_rows(page, 64)
    expect(page.get_by_test_id("token-chip")).to_have_count(64)
    expect(page.get_by_test_id("tokens-note")).to_contain_text("Kept the first 64 of 5,000 words")
    expect(page.get_by_test_id("error-tokens")).to_be_empty()
    assert len(page.url) < 2000, len(page.url)
    # A shared URL reproduces the view.
    weights = plot_data(page, "plot-attn_weights")
    other = browser.new_context(base_url=server_url).new_page()
    try:
        other.goto(page.url)
        wait_ready(other)
        wait_for_plot(other, "plot-attn_weights")
        assert_matrix_close(plot_data(other, "plot-attn_weights"), weights)
        expect(other.get_by_test_id("token-chip")).to_have_count(64)
    finally:
        other.context.close()


def test_url_keeps_only_what_differs_from_the_example(page: Page) -> None:
    open_explorer(page, "?preset=multi-head")
    assert page.url.endswith("/?preset=multi-head")
    page.get_by_label("Causal mask (no looking ahead)").click()
    page.wait_for_function("() => location.search.includes('causal=0')")
    wait_ready(page)
    assert re.search(r"\?preset=multi-head&causal=0$", page.url), page.url
    # The example button is pressed only while the view is exactly the example.
    expect(page.get_by_test_id("preset-multi-head")).to_have_attribute("aria-pressed", "false")
    page.get_by_label("Causal mask (no looking ahead)").click()
    page.wait_for_function("() => !location.search.includes('causal')")
    expect(page.get_by_test_id("preset-multi-head")).to_have_attribute("aria-pressed", "true")


def test_a_view_too_large_for_a_link_says_so(page: Page) -> None:
    open_explorer(page)
    long_words = " ".join(f"{'w' * 60}{i:02d}" for i in range(40))  # 40 tokens of 62 characters
    page.get_by_label("Embedding", exact=True).select_option("hashed")
    wait_ready(page)
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill(long_words)
    sentence.press("Enter")
    weights_rows(page, 40)
    note = page.get_by_test_id("url-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("too large for a link")
    assert len(page.url) < 2000
    assert "preset=bank-raw" in page.url


# ---------- 8. cross-attention sources are editable ----------


def test_cross_attention_sources_are_editable(page: Page, server_url: str) -> None:
    open_explorer(page, "?preset=cross-attention")
    editor = page.get_by_test_id("source-editor")
    expect(editor).to_be_visible()
    chips = page.get_by_test_id("source-chips").get_by_test_id("token-chip")
    expect(chips).to_have_count(4)
    assert tick_texts(page, "plot-attn_weights", "x") == ["stream", "bank", "mud", "money"]
    # Remove a source chip: the weights lose a column.
    page.get_by_role("button", name="Remove source token 4: money").click()
    weights_shape(page, 2, 3)
    wait_ready(page)
    # Add one word.
    page.get_by_label("Add a source word").fill("loan")
    page.get_by_label("Add a source word").press("Enter")
    weights_shape(page, 2, 4)
    wait_ready(page)
    assert tick_texts(page, "plot-attn_weights", "x") == ["stream", "bank", "mud", "loan"]
    # A whole source sentence.
    source = page.get_by_label("Or a whole source sentence")
    source.fill("money bank")
    source.press("Enter")
    weights_shape(page, 2, 2)
    wait_ready(page)
    expected = api(
        server_url,
        "/api/attention",
        {"tokens": ["bank", "loan"], "source_tokens": ["money", "bank"]},
    )
    assert_matrix_close(plot_data(page, "plot-attn_weights"), expected["heads"][0]["attn_weights"])
    assert tick_texts(page, "plot-attn_weights", "y") == ["bank", "loan"]
    # The URL keeps the sources: a reload shows the same.
    page.reload()
    wait_ready(page)
    wait_for_plot(page, "plot-attn_weights")
    expect(chips).to_have_text(["money×", "bank×"])
    assert_matrix_close(plot_data(page, "plot-attn_weights"), expected["heads"][0]["attn_weights"])
    # Cross-attention can be turned off (and on) for any example.
    page.get_by_label("Cross-attention (keys and values from source tokens)").uncheck()
    page.wait_for_function("() => location.search.includes('cross=0')")
    wait_ready(page)
    assert tick_texts(page, "plot-attn_weights", "x") == ["bank", "loan"]
    expect(editor).to_be_hidden()


# ---------- 9. from a token to what it reads ----------


def head_lines(page: Page) -> list[dict]:
    return page.eval_on_selector_all(
        "[data-testid='headview-lines'] line",
        "els => els.map(e => ({head: +e.dataset.head, key: +e.dataset.key,"
        " weight: +e.dataset.weight, opacity: +e.getAttribute('stroke-opacity'),"
        " colour: e.getAttribute('stroke')}))",
    )


def test_head_view_from_a_row_label(page: Page, server_url: str) -> None:
    open_explorer(page, "?preset=multi-head")
    trace = api(server_url, "/api/attention", api(server_url, "/api/presets/multi-head")["spec"])
    heads, tokens = trace["num_heads"], trace["tokens"]
    assert heads == 4 and len(tokens) == 8
    panel = page.get_by_test_id("headview-panel")
    expect(panel).not_to_have_attribute("open", "")
    # Click the row label of token 2 ("bank") on the weights map.
    page.locator("[data-testid='plot-attn_weights'] .ytick text").nth(2).click()
    expect(panel).to_have_attribute("open", "")
    expect(page.get_by_test_id("headview-query")).to_have_value("2")
    lines = head_lines(page)
    assert len(lines) == heads * len(tokens)
    for line in lines:
        expected = trace["heads"][line["head"]]["attn_weights"][2][line["key"]]
        assert abs(line["weight"] - expected) < 1e-6
        assert abs(line["opacity"] - expected) < 1e-4  # opacity = weight
    colours = {line["head"]: line["colour"] for line in lines}
    assert len(set(colours.values())) == heads  # one colour per head
    # Causal: token 2 reads nothing after itself.
    assert all(line["weight"] == 0 for line in lines if line["key"] > 2)
    summary = page.get_by_test_id("headview-summary")
    expect(summary).to_contain_text("bank reads most from")
    # Faint rows can be stretched: the strongest line becomes fully opaque.
    page.get_by_test_id("headview-fit").check()
    top = max(line["weight"] for line in lines)
    fitted = head_lines(page)
    assert max(line["opacity"] for line in fitted) == 1
    for line in fitted:
        assert abs(line["opacity"] - line["weight"] / top) < 1e-4
    # The choice is in the URL.
    page.wait_for_function("() => location.search.includes('focus=2')")
    # Bars show the same numbers.
    page.get_by_test_id("headview-mode-bars").check()
    bars = page.eval_on_selector_all(
        "[data-testid='headview-bars'] .hv-bar",
        "els => els.map(e => [+e.dataset.head, +e.dataset.key, +e.dataset.weight])",
    )
    assert len(bars) == heads * len(tokens)
    for h, j, w in bars:
        assert abs(w - trace["heads"][h]["attn_weights"][2][j]) < 1e-6
    page.wait_for_function("() => location.search.includes('hv=bars')")
    # Hiding a head removes its bars.
    page.get_by_test_id("headview-head").nth(0).uncheck()
    expect(page.locator("[data-testid='headview-bars'] .hv-bar")).to_have_count(
        (heads - 1) * len(tokens)
    )


def test_head_view_from_a_chip_and_a_cell(page: Page, server_url: str) -> None:
    open_explorer(page, "?preset=multi-head")
    trace = api(server_url, "/api/attention", api(server_url, "/api/presets/multi-head")["spec"])
    # The token chip itself.
    page.get_by_test_id("token-chip-choose").nth(5).click()
    expect(page.get_by_test_id("headview-query")).to_have_value("5")
    expect(page.get_by_test_id("token-chip-choose").nth(5)).to_have_attribute(
        "aria-pressed", "true"
    )
    lines = head_lines(page)
    for line in lines:
        expected = trace["heads"][line["head"]]["attn_weights"][5][line["key"]]
        assert abs(line["weight"] - expected) < 1e-6
    # A cell of the scores map chooses its row: on the map drawn before Plotly ...
    quick = page.locator("[data-testid='plot-attn_scores'] .quick-cells")
    box = quick.bounding_box()
    assert box is not None
    quick.dispatch_event(
        "click", {"clientX": box["x"] + 5, "clientY": box["y"] + box["height"] * 3.5 / 8}
    )
    expect(page.get_by_test_id("headview-query")).to_have_value("3")
    # ... and once Plotly has taken it over (a reader's pointer on it loads Plotly).
    plot = page.get_by_test_id("plot-attn_scores")
    plot.hover()
    expect(plot).to_have_attribute("data-renderer", "plotly", timeout=30_000)
    cells = plot.locator(".nsewdrag")
    box = cells.bounding_box()
    assert box is not None
    cells.click(position={"x": box["width"] * 0.5, "y": box["height"] * (1.5 / 8)})
    expect(page.get_by_test_id("headview-query")).to_have_value("1")
    # The token list inside the view chooses too.
    page.locator("[data-testid='headview-lines'] .hv-query").nth(7).click()
    expect(page.get_by_test_id("headview-query")).to_have_value("7")
    # And a reload shows the same view.
    page.wait_for_function("() => location.search.includes('focus=7')")
    page.reload()
    wait_ready(page)
    expect(page.get_by_test_id("headview-query")).to_have_value("7")
    expect(page.locator("[data-testid='headview-lines'] line")).to_have_count(4 * 8)


def test_head_view_escapes_token_text(page: Page) -> None:
    open_explorer(page)
    page.get_by_label("Embedding", exact=True).select_option("hashed")
    wait_ready(page)
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill("<img/src=x/onerror=alert(1)> bank <b>bold</b>")
    sentence.press("Enter")
    weights_rows(page, 3)
    page.get_by_test_id("token-chip-choose").nth(0).click()
    view = page.get_by_test_id("headview")
    expect(view.locator(".hv-query").nth(0)).to_have_text("<img/src=x/onerror=alert(1)>")
    expect(view.locator(".hv-query").nth(2)).to_have_text("<b>bold</b>")
    assert view.locator("img, b").count() == 0
