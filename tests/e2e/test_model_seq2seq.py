"""/model with an encoder-decoder (a small random Marian made here): the three stacks as
tabs, a cross map with target rows and source columns, and the alignment view: clicking a
written target word shows its cross-attention row in every layer and head.  At 390 px
nothing is wider than the window.

A server of its own (module scope) lists the Marian through ``ATTENTION_VIZ_MODELS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import MARIAN, marian

pytestmark = [pytest.mark.e2e, pytest.mark.model]

UINT8_ERROR = 1 / 510
SOURCE = "The cat sat on the mat because it was tired."
TARGET = "Die Katze sass auf der Matte."
MODEL = MARIAN


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Overrides the session server for this module: one that lists the Marian."""
    yield from marian(tmp_path_factory, "page-seq2seq")


def open_marian(page: Page, server_url: str) -> dict[str, Any]:
    """/model with the Marian and SOURCE, then TARGET shown; returns the API's answer."""
    page.goto(f"/model?model={MODEL}&text={quote(SOURCE)}")
    card = page.get_by_test_id("stacks-card")
    expect(card).to_be_visible(timeout=WAIT)
    expect(page.get_by_test_id("model-facts")).to_contain_text("marian encoder-decoder")
    expect(page.get_by_test_id("text-b-field")).to_be_hidden()  # the target is the second text
    expect(page.get_by_test_id("two-texts")).to_be_hidden()  # one head of one stack: not here
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)  # it wrote a target
    assert page.get_by_test_id("s2s-target").input_value() != ""
    page.get_by_test_id("s2s-target").fill(TARGET)
    page.get_by_test_id("s2s-read").click()
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    body = {"model": MODEL, "text": SOURCE, "target": TARGET}
    answer: dict[str, Any] = api(server_url, "/api/model/attention", body)
    expect(page.get_by_test_id("s2s-status")).to_contain_text(
        f"{len(answer['target_tokens'])} target tokens", timeout=WAIT
    )
    return answer


def cell_weights(page: Page, selector: str) -> list[list[float]]:
    return page.eval_on_selector_all(
        selector,
        "rows => rows.map(r => Array.from(r.querySelectorAll('td'),"
        " d => Number(d.dataset.weight)))",
    )


def assert_close(actual: list[float], expected: list[float], tol: float) -> None:
    assert len(actual) == len(expected)
    assert all(abs(a - e) <= tol for a, e in zip(actual, expected, strict=True)), (
        actual,
        expected,
    )


def test_cross_attention_tab_and_alignment_view(page: Page, server_url: str) -> None:
    answer = open_marian(page, server_url)
    source, target = answer["source_tokens"], answer["target_tokens"]
    panel = page.get_by_test_id("s2s-panel")
    expect(panel).to_have_attribute("data-stack", "encoder")
    expect(page.get_by_test_id("s2s-align")).to_be_hidden()
    page.get_by_test_id("s2s-tab-cross").click()
    expect(panel).to_have_attribute("data-stack", "cross")
    expect(page.get_by_test_id("s2s-tab-cross")).to_have_attribute("aria-selected", "true")
    # The large map: target rows, source columns, layer 1 head 1 as the API gives it.
    table = page.get_by_test_id("s2s-map")
    expect(table).to_have_attribute("data-rows", str(len(target)))
    expect(table).to_have_attribute("data-cols", str(len(source)))
    row_labels = table.locator("tbody th").all_text_contents()
    assert row_labels[0] == "<pad>" and [t.strip() for t in row_labels[1:3]] == ["Die", "K"]
    shown = cell_weights(page, "[data-testid='s2s-map'] tbody tr")
    for got, want in zip(shown, answer["cross_attentions"][0][0], strict=True):
        assert_close(got, want, UINT8_ERROR + 1e-4)
    # Every layer x head (and the mean) has a thumbnail.
    assert page.locator("[data-testid='s2s-grid'] .map-btn").count() == 2 * (4 + 1)
    # The large map is coloured to its own largest weight: the colour bar says which.
    bar = page.get_by_test_id("s2s-colour-bar")
    expect(bar).to_have_attribute("data-scale", "linear")
    top = max(max(row) for row in answer["cross_attentions"][0][0])
    assert float(bar.get_attribute("data-zmax") or "nan") == pytest.approx(top, abs=UINT8_ERROR)
    expect(bar).to_contain_text("linear scale")

    # Click a written word: "K" (target index 2, the second word written).
    align = page.get_by_test_id("s2s-align")
    expect(align).to_be_visible()
    words = page.get_by_test_id("s2s-word")
    expect(words).to_have_count(len(target) - 1)
    word = words.nth(1)
    assert word.text_content().strip() == "K"
    word.click()
    expect(word).to_have_attribute("aria-pressed", "true")
    view = page.get_by_test_id("s2s-align-view")
    expect(view).to_have_attribute("data-token", "2")
    expect(view).to_have_attribute("data-row", "1")  # written while the decoder read "Die"
    expect(page.get_by_test_id("s2s-align-what")).to_contain_text("While writing")
    rows = page.get_by_test_id("s2s-align-row")
    expect(rows).to_have_count(2 * (4 + 1))
    for layer in (1, 2):
        for head in (1, 2, 3, 4):
            line = page.locator(
                f"[data-testid='s2s-align-row'][data-layer='{layer}'][data-head='{head}'] td"
            )
            shown = [re.sub(r"·\d+$", "", t).strip() for t in line.all_text_contents()]
            assert shown == [s.strip() for s in source]
            got = [float(w) for w in line.evaluate_all("ds => ds.map(d => d.dataset.weight)")]
            assert_close(
                got, answer["cross_attentions"][layer - 1][head - 1][1], UINT8_ERROR + 1e-4
            )
    # The same word as the next input: its own row.
    page.get_by_test_id("s2s-when-input").check()
    expect(view).to_have_attribute("data-row", "2")
    line = page.locator("[data-testid='s2s-align-row'][data-layer='2'][data-head='3'] td")
    got = [float(w) for w in line.evaluate_all("ds => ds.map(d => d.dataset.weight)")]
    assert_close(got, answer["cross_attentions"][1][2][2], UINT8_ERROR + 1e-4)


def test_decoder_tab_is_causal(page: Page, server_url: str) -> None:
    answer = open_marian(page, server_url)
    page.get_by_test_id("s2s-tab-decoder").click()
    page.get_by_test_id("s2s-map-L2-H3").click()
    table = page.get_by_test_id("s2s-map")
    expect(table).to_have_attribute("data-stack", "decoder")
    expect(table).to_have_attribute("data-head", "3")
    T = len(answer["target_tokens"])
    masked = page.locator("[data-testid='s2s-map'] td.masked")
    expect(masked).to_have_count(T * (T - 1) // 2)
    first = cell_weights(page, "[data-testid='s2s-map'] tbody tr")[3][:4]
    assert_close(first, answer["decoder_attentions"][1][2][3][:4], UINT8_ERROR + 1e-4)


def test_encoder_decoder_fits_390_px(narrow: Page, server_url: str) -> None:
    open_marian(narrow, server_url)
    narrow.get_by_test_id("s2s-tab-cross").click()
    narrow.get_by_test_id("s2s-word").nth(2).click()
    expect(narrow.get_by_test_id("s2s-align-view")).to_have_attribute("data-token", "3")
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    rights = narrow.eval_on_selector_all(
        "[data-testid='stacks-card'], [data-testid='stacks-card'] textarea, .s2s-map-wrap",
        "els => els.map(e => e.getBoundingClientRect().right)",
    )
    assert all(r <= 390 for r in rights), rights
    ARTIFACTS.mkdir(exist_ok=True)
    narrow.screenshot(path=str(ARTIFACTS / "model-seq2seq-390.png"), full_page=True)


@pytest.mark.allow_console("422")
def test_a_target_over_the_limit_is_said_beside_the_target(page: Page, server_url: str) -> None:
    open_marian(page, server_url)
    page.get_by_test_id("s2s-target").fill(" ".join(["Katze"] * 80))
    page.get_by_test_id("s2s-read").click()
    error = page.get_by_test_id("error-s2s-target")
    # Worded from the error's type and ctx (limit 64: the model's context), not its sentence.
    expect(error).to_contain_text("The target", timeout=WAIT)
    expect(error).to_contain_text("at most 64")
    expect(page.get_by_test_id("s2s-target")).to_have_attribute("aria-invalid", "true")
    # The maps of the last target that could be computed stay.
    expect(page.get_by_test_id("s2s-map")).to_have_attribute("data-stack", "encoder")


def stacks_card_shows(page: Page, stack: str, layer: int, head: int) -> None:
    """The stacks card is drawn again on the target, the tab and the head it was left on."""
    expect(page.get_by_test_id("stacks-card")).to_have_attribute("data-ready", "true", timeout=WAIT)
    expect(page.get_by_test_id("s2s-target")).to_have_value(TARGET)
    expect(page.get_by_test_id(f"s2s-tab-{stack}")).to_have_attribute("aria-selected", "true")
    table = page.get_by_test_id("s2s-map")
    expect(table).to_have_attribute("data-layer", str(layer))
    expect(table).to_have_attribute("data-head", str(head))


def test_the_view_is_in_the_link(page: Page, server_url: str) -> None:
    """Target, tab, head and chosen word survive a reload (the URL's hash)."""
    open_marian(page, server_url)
    page.get_by_test_id("s2s-tab-cross").click()
    page.get_by_test_id("s2s-map-L2-H3").click()
    page.get_by_test_id("s2s-word").nth(2).click()
    page.get_by_test_id("s2s-when-input").check()
    expect(page.get_by_test_id("s2s-align-view")).to_have_attribute("data-row", "3")
    assert "stack=cross" in page.url and "word=3" in page.url and "model=tiny-marian" in page.url
    page.reload()
    stacks_card_shows(page, "cross", 2, 3)
    view = page.get_by_test_id("s2s-align-view")
    expect(view).to_have_attribute("data-token", "3")
    expect(view).to_have_attribute("data-row", "3")
    expect(page.get_by_test_id("s2s-when-input")).to_be_checked()
    # The main form's writes keep the hash (model.js owns the query).
    page.get_by_test_id("hide-special").check()
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)
    assert "stack=cross" in page.url


def test_the_encoders_heads_are_scored_and_ablation_reads_the_stacks_card(
    page: Page, server_url: str
) -> None:
    """Issue 22 on an encoder-decoder: the score card (loaded once in view) scores the
    encoder's self-attention, as the API does; ablation is offered on the stacks card's
    stack and target (test_model_seq2seq_cards), the lens is not shown."""
    open_marian(page, server_url)
    card = page.get_by_test_id("heads-card")
    card.scroll_into_view_if_needed()
    expect(card).to_have_attribute("data-drawn", "1", timeout=WAIT)
    expect(page.get_by_test_id("scores-status")).to_contain_text("encoder's self-attention")
    scores = api(server_url, "/api/model/head-scores", {"model": MODEL, "text": SOURCE})
    assert scores["stack"] == "encoder"
    cell = page.get_by_test_id("score-grid-L1-H1")
    value = float(cell.get_attribute("data-value") or "nan")
    assert value == pytest.approx(scores["previous_token"][0][0], abs=1e-6)
    expect(page.get_by_test_id("ablate-card")).to_be_visible()
    expect(page.get_by_test_id("ablate-stack-hint")).to_be_visible()
    expect(page.get_by_test_id("lens-card")).to_be_hidden()
    expect(page.get_by_test_id("map-measure")).to_be_disabled()


def test_a_changed_source_drops_the_target_written_for_the_last_one(
    page: Page, server_url: str
) -> None:
    page.goto(f"/model?model={MODEL}&text={quote(SOURCE)}")
    card = page.get_by_test_id("stacks-card")
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    first = page.get_by_test_id("s2s-target").input_value()
    assert first != ""
    other = "A dog ran in the park."
    page.get_by_test_id("model-text").fill(other)
    page.get_by_test_id("model-run").click()
    expect(page.get_by_test_id("s2s-status")).to_contain_text(
        "The source changed, so the target the model had written for the last one was dropped",
        timeout=WAIT,
    )
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    written = api(
        server_url, "/api/model/generate", {"model": MODEL, "prompt": other, "max_new_tokens": 40}
    )  # the card writes 40 tokens at most
    expect(page.get_by_test_id("s2s-target")).to_have_value(written["generated_text"])
    # A target the reader typed stays: it is theirs.
    page.get_by_test_id("s2s-target").fill(TARGET)
    page.get_by_test_id("s2s-read").click()
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    page.get_by_test_id("model-text").fill(SOURCE)
    page.get_by_test_id("model-run").click()
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    expect(page.get_by_test_id("s2s-target")).to_have_value(TARGET)
    expect(page.get_by_test_id("s2s-status")).not_to_contain_text("The source changed")
