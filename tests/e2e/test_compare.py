"""The compare page: "bank" in a river and a finance sentence."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import api, assert_matrix_close, plot_data, wait_for_plot

pytestmark = pytest.mark.e2e


def fmt(v: list[float]) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in v) + "]"


def test_bank_in_two_contexts(page: Page, server_url: str) -> None:
    page.goto("/compare")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    spec = api(server_url, "/api/presets/bank-raw")["spec"]
    body = {
        k: v
        for k, v in spec.items()
        if k not in ("tokens", "source_tokens", "source_embedding", "steps")
    }
    result = api(
        server_url,
        "/api/compare",
        {**body, "tokens_a": ["stream", "bank", "mud"], "tokens_b": ["money", "bank", "loan"]},
    )
    (bank,) = result["shared"]
    card = page.locator("[data-testid='shared-card'][data-token='bank']")
    expect(card.get_by_test_id("input-cosine")).to_have_text("1.000")
    expect(card.get_by_test_id("output-cosine")).to_have_text(f"{bank['output_cosine']:.3f}")
    assert bank["output_cosine"] < 0.99  # the point of the page: context changed "bank"
    expect(card.get_by_test_id("context-a")).to_have_text(fmt(result["a"]["output"][1]))
    expect(card.get_by_test_id("context-b")).to_have_text(fmt(result["b"]["output"][1]))
    for side in ("a", "b"):
        wait_for_plot(page, f"plot-weights-{side}")
        assert_matrix_close(
            plot_data(page, f"plot-weights-{side}"), result[side]["heads"][0]["attn_weights"]
        )
        assert_matrix_close(plot_data(page, f"plot-context-{side}"), result[side]["output"])
    diff = plot_data(page, "plot-context-diff")
    expected = [
        a - b for a, b in zip(result["a"]["output"][1], result["b"]["output"][1], strict=True)
    ]
    assert_matrix_close(diff, [expected])
    # The headline fits in the first screen.
    box = card.bounding_box()
    assert box is not None and box["y"] + box["height"] < 900


def test_any_two_sentences(page: Page) -> None:
    page.goto(
        "/compare?preset=bank-hand-set&a=mud+bank+stream+bank&b=loan+bank&emb=vocabulary&causal=1"
    )
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"))
    wait_for_plot(page, "plot-weights-a")
    assert len(plot_data(page, "plot-weights-a")) == 4
    weights = plot_data(page, "plot-weights-a")
    assert all(weights[i][j] == 0 for i in range(4) for j in range(i + 1, 4))
    card = page.get_by_test_id("shared-card")
    expect(card).to_have_count(1)  # the API pairs each shared word once
    expect(card).to_have_attribute("data-token", "bank")
    page.get_by_label("Sentence B").fill("money loan")
    page.get_by_label("Sentence B").press("Enter")
    expect(page.get_by_test_id("no-shared")).to_be_visible()
    assert "b=money+loan" in page.url


@pytest.mark.model
def test_model_embeddings_for_any_words(page: Page) -> None:
    """MiniLM vectors for words outside the toy vocabulary; a shared word shares its vector."""
    page.goto("/compare?preset=bank-raw&a=the+river+bank&b=the+bank+approved&emb=model&causal=0")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"), timeout=60_000)
    expect(page.get_by_test_id("cmp-embedding")).to_have_value("model")
    expect(page.get_by_test_id("error-general")).to_be_empty()
    card = page.locator("[data-testid='shared-card'][data-token='bank']")
    expect(card.get_by_test_id("input-cosine")).to_have_text("1.000")
    wait_for_plot(page, "plot-context-a")
    assert len(plot_data(page, "plot-context-a")[0]) == 256
