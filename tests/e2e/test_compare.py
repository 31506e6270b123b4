"""The compare page: "bank" in a river and a finance sentence."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import api, assert_matrix_close, plot_data, tick_texts, wait_for_plot

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


# ---------- issue 14: words that tell the truth ----------


def open_compare(page: Page, query: str = "") -> None:
    page.goto(f"/compare{query}")
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"), timeout=30_000)


def test_identical_sentences_are_unchanged(page: Page) -> None:
    open_compare(page, "?preset=bank-raw&a=stream+bank+mud&b=stream+bank+mud&emb=vocabulary")
    cards = page.get_by_test_id("shared-card")
    expect(cards).to_have_count(3)
    for i in range(3):
        card = cards.nth(i)
        expect(card).to_have_attribute("data-verdict", "unchanged")
        expect(card.get_by_test_id("output-cosine")).to_have_text("1.000")
        expect(card.get_by_test_id("verdict")).to_contain_text("Unchanged by context")
        expect(card.get_by_test_id("verdict")).to_contain_text("distance 0.000")
    text = page.get_by_test_id("shared-panels").inner_text()
    assert "Slightly changed" not in text and "Strongly changed" not in text
    assert "context changed it" not in text
    expect(page.get_by_test_id("shared-more")).to_have_count(0)


def test_verdict_names_the_change_with_its_figure(page: Page, server_url: str) -> None:
    open_compare(page)
    card = page.locator("[data-testid='shared-card'][data-token='bank']")
    expect(card).to_have_attribute("data-verdict", "strongly")  # cosine 0.623 < 0.95
    expect(card.get_by_test_id("verdict")).to_contain_text(
        "Strongly changed by context: cosine 0.623"
    )
    # One way of counting positions everywhere: from 0, as the plot labels and the JSON.
    expect(card.locator("h2")).to_have_text("“bank” at A·1, B·1")
    expect(page.get_by_test_id("shared-legend")).to_contain_text("Positions count from 0")
    assert "word 2 of" not in page.locator("main").inner_text()
    assert tick_texts(page, "plot-context-diff", "y") == ["bank A·1 B·1"]


def test_many_shared_words_most_changed_first_rest_folded(page: Page, server_url: str) -> None:
    a, b = "stream bank mud money loan bank stream", "money loan mud stream bank"
    open_compare(page, f"?preset=bank-raw&a={a.replace(' ', '+')}&b={b.replace(' ', '+')}")
    spec = api(server_url, "/api/presets/bank-raw")["spec"]
    body = {k: v for k, v in spec.items() if k in ("embedding", "projection", "scale")}
    result = api(server_url, "/api/compare", {**body, "tokens_a": a.split(), "tokens_b": b.split()})
    ranked = sorted(result["shared"], key=lambda s: (s["output_cosine"], s["position_a"]))
    assert len(ranked) == 5
    cards = page.get_by_test_id("shared-card")
    expect(cards).to_have_count(3)
    expect(cards.get_by_test_id("shared-token")).to_have_text([s["token"] for s in ranked[:3]])
    for i, s in enumerate(ranked[:3]):
        expect(cards.nth(i).get_by_test_id("output-cosine")).to_have_text(
            f"{s['output_cosine']:.3f}"
        )
        verdict = "slightly" if s["output_cosine"] >= 0.95 else "strongly"
        expect(cards.nth(i)).to_have_attribute("data-verdict", verdict)
    folded = page.get_by_test_id("shared-more")
    expect(folded).not_to_have_attribute("open", "")
    expect(folded.locator("summary")).to_have_text("2 more shared words, less changed")
    rows = folded.get_by_test_id("shared-row")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.token)") == [
        s["token"] for s in ranked[3:]
    ]
    folded.locator("summary").click()
    expect(rows.first).to_be_visible()
    expect(rows.first).to_contain_text(f"A·{ranked[3]['position_a']}, B·{ranked[3]['position_b']}")
    # The difference map lists the shared words in the same order.
    labels = [f"{s['token']} A·{s['position_a']} B·{s['position_b']}" for s in ranked]
    assert tick_texts(page, "plot-context-diff", "y") == labels


@pytest.mark.model
def test_a_word_outside_the_toy_vocabulary_gets_minilm_vectors_as_in_the_explorer(
    page: Page,
) -> None:
    open_compare(page)
    sentence_b = page.get_by_label("Sentence B")
    sentence_b.fill("river bank")
    sentence_b.press("Enter")
    expect(page.get_by_test_id("cmp-embedding")).to_have_value("model")
    notice = page.get_by_test_id("embedding-notice")
    expect(notice).to_contain_text("This word is not in the toy vocabulary: river")
    expect(notice).to_contain_text("MiniLM's word vector")
    expect(notice).to_contain_text("projected to this page's 256")
    wait_for_plot(page, "plot-context-a")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-context-b']\").data[0].z.length === 2"
    )
    assert len(plot_data(page, "plot-context-b")[0]) == 256
    expect(page.get_by_test_id("error-tokens_b")).to_be_empty()
    results = page.get_by_test_id("compare-results")
    expect(results).not_to_have_attribute("data-stale", "true")
    expect(page.locator("[data-testid='shared-card'][data-token='bank']")).to_have_count(1)
    assert "emb=model" in page.url
    # Hashed vectors instead, as the notice offers; toy words alone go back to the vocabulary.
    notice.get_by_test_id("use-hashed-instead").click()
    expect(page.get_by_test_id("cmp-embedding")).to_have_value("hashed")
    expect(notice).to_contain_text("hashed vector")
    sentence_b.fill("money bank loan")
    sentence_b.press("Enter")
    expect(page.get_by_test_id("cmp-embedding")).to_have_value("vocabulary")
    expect(notice).to_be_hidden()
    # An empty sentence still marks the results out of date beside it.
    sentence_b.fill("")
    sentence_b.press("Enter")
    expect(page.get_by_test_id("error-tokens_b")).to_contain_text("Type at least one word.")
    expect(results).to_have_attribute("data-stale", "true")
    expect(page.get_by_test_id("stale-note")).to_contain_text("Out of date")


def test_pasting_5000_words_stops_at_the_limit(page: Page) -> None:
    open_compare(page)
    sentence_a = page.get_by_label("Sentence A")
    sentence_a.fill(" ".join(["stream", "bank", "mud"] * 1667))
    sentence_a.press("Enter")
    expect(page.get_by_test_id("note-tokens_a")).to_contain_text("Kept the first 64 of 5,001")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-weights-a']\").data[0].z.length === 64"
    )
    assert len(sentence_a.input_value().split()) == 64
    assert len(page.url) < 2000
