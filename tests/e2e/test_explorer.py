"""The explorer: its numbers are the API's, and causal, cell edits and the URL work."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import api, assert_matrix_close, plot_data, tick_texts, wait_for_plot
from tests.e2e.explorer_page import embeddings_unavailable, open_explorer, wait_ready

pytestmark = pytest.mark.e2e


def weights_differ_from(page: Page, before: list) -> None:
    page.wait_for_function(
        "before => JSON.stringify(document.querySelector("
        "\"[data-testid='plot-attn_weights']\").data[0].z) !== JSON.stringify(before)",
        arg=before,
    )
    wait_ready(page)


def test_flagship_heatmaps_equal_the_api(page: Page, server_url: str) -> None:
    open_explorer(page)
    spec = api(server_url, "/api/presets/bank-raw")["spec"]
    trace = api(server_url, "/api/attention", spec)
    head = trace["heads"][0]
    assert_matrix_close(plot_data(page, "plot-attn_weights"), head["attn_weights"])
    assert_matrix_close(plot_data(page, "plot-attn_scores"), head["attn_scores"])
    assert_matrix_close(plot_data(page, "plot-context_vec"), head["context_vec"])
    assert_matrix_close(plot_data(page, "plot-x"), trace["x"])
    # Seed 004's numbers: bank attends to itself most (softmax of 0.96, 1.32, 0.72).
    assert abs(plot_data(page, "plot-attn_weights")[1][1] - 0.4451) < 1e-3
    assert tick_texts(page, "plot-attn_weights", "x") == ["stream", "bank", "mud"]
    assert tick_texts(page, "plot-attn_weights", "y") == ["stream", "bank", "mud"]
    # Weights use a sequential scale from 0 to 1; signed steps a diverging one centred at 0.
    assert plot_data(page, "plot-attn_weights", field="zmin") == 0
    assert plot_data(page, "plot-attn_weights", field="zmax") == 1
    assert plot_data(page, "plot-attn_scores", field="zmid") == 0


def test_causal_makes_weights_lower_triangular(page: Page) -> None:
    open_explorer(page, "?preset=bank-hand-set")
    before = plot_data(page, "plot-attn_weights")
    assert any(before[i][j] > 0.01 for i in range(3) for j in range(3) if j > i)
    page.get_by_label("Causal mask (no looking ahead)").check()
    weights_differ_from(page, before)
    after = plot_data(page, "plot-attn_weights")
    masked = plot_data(page, "plot-masked_scores")
    for i in range(3):
        assert abs(sum(after[i]) - 1) < 1e-5
        for j in range(i + 1, 3):
            assert after[i][j] == 0
            assert masked[i][j] is None  # −inf travels as null and is drawn as a gap
    assert "causal=1" in page.url


def test_editing_a_matrix_cell_redraws(page: Page, server_url: str) -> None:
    open_explorer(page)
    before = plot_data(page, "plot-attn_weights")
    q_before = plot_data(page, "plot-q")
    cell = page.get_by_label("W_query row 1 (in0) column 2")
    cell.fill("2")
    cell.press("Enter")
    weights_differ_from(page, before)
    assert plot_data(page, "plot-q") != q_before
    assert "~explicit~" in page.url  # the spec switched to explicit matrices
    # The redrawn numbers are the API's for the edited spec.
    eye = [[1.0 if i == j else 0.0 for j in range(4)] for i in range(4)]
    w_query = [row[:] for row in eye]
    w_query[0][1] = 2.0
    vocab = api(server_url, "/api/vocabularies")[0]["words"]
    spec = {
        "tokens": ["stream", "bank", "mud"],
        "embedding": {"kind": "explicit", "vectors": [vocab[w] for w in ("stream", "bank", "mud")]},
        "projection": {"kind": "explicit", "W_query": w_query, "W_key": eye, "W_value": eye},
        "scale": "none",
    }
    expected = api(server_url, "/api/attention", spec)["heads"][0]["attn_weights"]
    assert_matrix_close(plot_data(page, "plot-attn_weights"), expected, tol=1e-5)


def test_editing_a_seeded_matrix_writes_the_seed_out(page: Page, server_url: str) -> None:
    """torch.rand's W_query is shown and editable: /api/expand writes it out, the edit lands."""
    open_explorer(page, "?preset=next-day-rand")
    spec = api(server_url, "/api/presets/next-day-rand")["spec"]
    assert spec["projection"]["kind"] == "seeded_rand"
    expanded = api(server_url, "/api/expand", spec)
    assert expanded["projection"]["kind"] == "explicit"
    expect(page.get_by_test_id("grid-note")).to_have_count(0)
    cell = page.get_by_label("W_query row 1 (in0) column 2")
    expect(cell).to_have_value(str(round(expanded["projection"]["W_query"][0][1], 4)))
    q_before = plot_data(page, "plot-q")
    cell.fill("2")
    cell.press("Enter")
    page.wait_for_function(
        "before => JSON.stringify(document.querySelector("
        "\"[data-testid='plot-q']\").data[0].z) !== JSON.stringify(before)",
        arg=q_before,
    )
    wait_ready(page)
    edited = {k: v for k, v in expanded.items() if v is not None}
    edited["projection"]["W_query"][0][1] = 2.0
    expected = api(server_url, "/api/attention", edited)
    assert_matrix_close(plot_data(page, "plot-q"), expected["heads"][0]["q"], tol=1e-5)
    assert_matrix_close(
        plot_data(page, "plot-attn_weights"), expected["heads"][0]["attn_weights"], tol=1e-5
    )
    expect(page.get_by_label("Projection", exact=True)).to_have_value("explicit")
    expect(page.get_by_label("Embedding", exact=True)).to_have_value("explicit")
    # The URL names the example it started from and the numbers that replaced its seeds.
    assert "seeded_rand" not in page.url and "~explicit~" in page.url
    assert len(page.url) < 2000  # 144 float32 numbers as base64, not 144 long decimals
    # The edited numbers live in the URL: a reload draws the same q.
    page.reload()
    wait_ready(page)
    wait_for_plot(page, "plot-q")
    assert_matrix_close(plot_data(page, "plot-q"), expected["heads"][0]["q"], tol=1e-5)
    expect(page.get_by_label("W_query row 1 (in0) column 2")).to_have_value("2")


def test_url_round_trips_the_view(page: Page) -> None:
    open_explorer(page)
    before = plot_data(page, "plot-attn_weights")
    page.get_by_label("Or a whole sentence").fill("money bank loan bank")
    page.get_by_test_id("sentence-use").click()
    weights_differ_from(page, before)
    page.get_by_label("Heads", exact=True).fill("2")
    page.get_by_label("Heads", exact=True).press("Enter")
    expect(page.get_by_test_id("head-tab-1")).to_be_visible()
    page.get_by_label("Causal mask (no looking ahead)").check()
    page.wait_for_function("() => location.search.includes('causal=1')")
    wait_ready(page)
    page.get_by_test_id("head-tab-1").click()
    expect(page.get_by_test_id("head-tab-1")).to_have_attribute("aria-selected", "true")
    page.wait_for_function("() => location.search.includes('view=1')")
    wait_ready(page)
    url = page.url
    weights = plot_data(page, "plot-attn_weights")
    ticks = tick_texts(page, "plot-attn_weights")
    assert ticks == ["money", "bank·1", "loan", "bank·3"]  # repeated tokens stay distinct

    page.reload()
    wait_ready(page)
    wait_for_plot(page, "plot-attn_weights")
    assert page.url == url
    expect(page.get_by_test_id("token-chip")).to_have_text(["money×", "bank×", "loan×", "bank×"])
    expect(page.get_by_label("Heads", exact=True)).to_have_value("2")
    expect(page.get_by_label("Causal mask (no looking ahead)")).to_be_checked()
    expect(page.get_by_test_id("head-tab-1")).to_have_attribute("aria-selected", "true")
    assert_matrix_close(plot_data(page, "plot-attn_weights"), weights)
    assert tick_texts(page, "plot-attn_weights") == ticks


def test_unknown_word_offers_a_vector(page: Page) -> None:
    open_explorer(page)
    # The reader asks for the toy vocabulary itself: unknown words then need a vector.
    page.get_by_label("Embedding", exact=True).select_option("vocabulary")
    wait_ready(page)
    page.get_by_label("Add a word").fill("river")
    page.get_by_label("Add a word").press("Enter")
    row = page.get_by_test_id("unknown-row")
    expect(row).to_contain_text("river")
    expect(page.get_by_test_id("error-tokens")).to_contain_text("Add a vector")
    before = plot_data(page, "plot-attn_weights")
    row.get_by_test_id("add-vector").click()
    weights_differ_from(page, before)
    assert len(plot_data(page, "plot-attn_weights")) == 4
    expect(page.get_by_test_id("unknown-words")).to_be_hidden()


def test_limit_error_is_shown_next_to_the_control(page: Page) -> None:
    """Caught before any request (the page knows the server's limits), beside Heads."""
    open_explorer(page)
    page.get_by_label("Heads", exact=True).fill("17")  # over ATTENTION_VIZ_MAX_HEADS
    page.get_by_label("Heads", exact=True).press("Enter")
    error = page.get_by_test_id("error-num_heads")
    expect(error).to_contain_text("at most 16")
    expect(error).to_be_visible()


@pytest.mark.model
def test_model_embeddings_for_any_word(page: Page, server_url: str) -> None:
    """Issue 5: a word outside the toy vocabulary gets MiniLM's vector."""
    open_explorer(page)
    page.get_by_label("Embedding", exact=True).select_option("model")
    page.get_by_label("Add a word").fill("river")
    page.get_by_label("Add a word").press("Enter")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"), timeout=60_000)
    wait_for_plot(page, "plot-x")
    # 384 numbers per word, narrowed to what the server takes (ATTENTION_VIZ_MAX_DIM = 256).
    dim = min(384, 256)
    x = plot_data(page, "plot-x")
    assert len(x) == 4 and all(len(row) == dim for row in x)
    assert tick_texts(page, "plot-attn_weights") == ["stream", "bank", "mud", "river"]
    for box in ("error-tokens", "error-embedding", "error-general", "error-grids"):
        expect(page.get_by_test_id(box)).to_be_empty()
    expect(page.get_by_test_id("unknown-words")).to_be_hidden()
    expect(page.get_by_test_id("model-note")).to_contain_text("384")
    expect(page.get_by_label("Embedding dim")).to_have_value(str(dim))
    assert "~model~" in page.url  # the URL keeps the kind, not 1024 numbers
    # The plots are the API's for those vectors.
    expected = api(
        server_url,
        "/api/attention",
        {
            "tokens": ["stream", "bank", "mud", "river"],
            "embedding": {"kind": "explicit", "vectors": x},
            "scale": "none",
        },
    )
    assert_matrix_close(plot_data(page, "plot-attn_weights"), expected["heads"][0]["attn_weights"])
    page.reload()
    wait_ready(page)
    wait_for_plot(page, "plot-x")
    assert_matrix_close(plot_data(page, "plot-x"), x)


@pytest.mark.allow_console(r"status of 503|^503$")
def test_model_embeddings_unavailable_is_explained(page: Page) -> None:
    """Without the pretrained model the API answers an error: the page says so by the options."""
    embeddings_unavailable(page)
    open_explorer(page)
    page.get_by_label("Embedding", exact=True).select_option("model")
    error = page.get_by_test_id("error-embedding")
    expect(error).to_contain_text("Model embeddings are not available")
    expect(error).to_contain_text("HTTP 503: no checkpoint")
    expect(page.get_by_test_id("status")).to_be_empty()
