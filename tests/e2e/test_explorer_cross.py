"""The explorer after the cross-attention example: titles that name the source, no causal
mask across two sequences, and an own sentence that starts self-attention (issue 24.5)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import plot_data, tick_texts
from tests.e2e.explorer_page import open_explorer, wait_ready
from tests.e2e.test_explorer_reader import weights_shape

pytestmark = pytest.mark.e2e

SOURCE = ["stream", "bank", "mud", "money"]


def step_title(page: Page, key: str) -> str:
    return page.locator(f"[data-step='{key}'] .step-title").inner_text()


def test_cross_attention_names_the_source_and_has_no_causal_mask(page: Page) -> None:
    open_explorer(page, "?preset=cross-attention")
    expect(page.get_by_test_id("explorer-title")).to_have_text("Cross-attention, step by step")
    assert step_title(page, "k") == "k = source @ W_key"
    assert step_title(page, "v") == "v = source @ W_value"
    assert step_title(page, "q") == "q = x @ W_query"
    expect(page.locator("[data-step='attn_weights'] .step-text")).to_contain_text("source token")
    causal = page.get_by_label("Causal mask (no looking ahead)")
    expect(causal).to_be_disabled()
    expect(causal).not_to_be_checked()
    expect(page.get_by_test_id("causal-help")).to_be_visible()
    expect(page.get_by_test_id("causal-help")).to_contain_text("No causal mask in cross-attention")
    # No triangle over queries × sources: every score is there.
    masked = plot_data(page, "plot-masked_scores")
    assert masked and all(v is not None for row in masked for v in row)
    assert tick_texts(page, "plot-attn_weights", "x") == SOURCE


def test_a_url_asking_for_causal_cross_attention_gets_none(page: Page) -> None:
    open_explorer(page, "?preset=cross-attention")
    page.goto(page.url.replace("?", "?causal=1&", 1))
    wait_ready(page)
    masked = plot_data(page, "plot-masked_scores")
    assert masked and all(v is not None for row in masked for v in row)


def test_an_own_sentence_starts_self_attention(page: Page) -> None:
    open_explorer(page, "?preset=cross-attention")
    sentence = page.get_by_label("Or a whole sentence")
    sentence.fill("the cat sat on the mat")
    sentence.press("Enter")
    weights_shape(page, 6, 6)
    wait_ready(page)
    words = ["the", "cat", "sat", "on", "the", "mat"]
    assert [t.split("·")[0] for t in tick_texts(page, "plot-attn_weights", "x")] == words
    expect(page.get_by_test_id("explorer-title")).to_have_text("Self-attention, step by step")
    expect(page.get_by_test_id("source-editor")).to_be_hidden()
    expect(
        page.get_by_label("Cross-attention (keys and values from source tokens)")
    ).not_to_be_checked()
    assert step_title(page, "k") == "k = x @ W_key"
    expect(page.get_by_label("Causal mask (no looking ahead)")).to_be_enabled()
    expect(page.get_by_test_id("causal-help")).to_be_hidden()
    page.wait_for_function("() => location.search.includes('cross=0')")
