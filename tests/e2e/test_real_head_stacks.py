"""An encoder-decoder's heads step by step: /model's encoder, decoder and cross tabs open
their zoomed head in the explorer's real-head view with its stack and target; the page
draws the numbers of ``POST /api/model/head`` for that stack (a cross head: target rows,
source columns, k and v from the source; a decoder head: its causal triangle masked).
Score steps the model has show as panels of their own: T5's relative-position bias
(``biased_scores``) and Gemma 2's soft-capping (``capped_scores``).  At 390 px nothing
is wider than the window.

A server of its own (module scope) lists a random Marian, T5 and Gemma 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS, api, plot_data, wait_for_plot
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import models_server
from tests.e2e.test_model_seq2seq import MODEL, SOURCE, TARGET, open_marian, stacks_card_shows
from tests.models.hf_checkpoints import make_hf
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("real-head-stacks")
    make_seq2seq(root / MODEL, "marian")
    make_seq2seq(root / "tiny-t5", "t5")
    make_hf(root / "tiny-gemma2", "tiny-gemma2")
    return root


@pytest.fixture(scope="module")
def server_url(models_dir: Path) -> Iterator[str]:
    """Overrides the session server for this module: one that lists these models."""
    with models_server(models_dir) as url:
        yield url


def flat(matrix: list[list[float | None]]) -> list[float | None]:
    return [v for row in matrix for v in row]


def shown_steps(page: Page) -> list[str]:
    """The pipeline's panels in order, as the page shows them."""
    return page.eval_on_selector_all(
        "[data-testid='pipeline'] > figure:not([hidden])", "fs => fs.map(f => f.dataset.step)"
    )


def open_head_from_model(page: Page, server_url: str, stack: str, layer: int, head: int) -> None:
    """From /model's Marian card: the stack's tab, the head's thumbnail, then its link."""
    open_marian(page, server_url)
    page.get_by_test_id(f"s2s-tab-{stack}").click()
    page.get_by_test_id(f"s2s-map-L{layer}-H{head}").click()
    link = page.get_by_test_id("s2s-open-head")
    expect(link).to_have_text(f"Layer {layer}, head {head} step by step →")
    page.get_by_test_id(f"s2s-map-L{layer}-mean").click()
    expect(link).to_be_hidden()  # a mean is not one head
    page.get_by_test_id(f"s2s-map-L{layer}-H{head}").click()
    link.click()
    expect(page).to_have_url(re.compile(rf"/\?real={MODEL}&"))
    assert parse_qs(urlsplit(page.url).query) == {
        "real": [MODEL],
        "text": [SOURCE],
        "target": [TARGET],
        "stack": [stack],
        "layer": [str(layer)],
        "head": [str(head)],
    }
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)


def head_answer(server_url: str, model: str, **body: Any) -> dict[str, Any]:
    answer: dict[str, Any] = api(server_url, "/api/model/head", {"model": model, **body})
    return answer


def test_a_cross_head_opens_from_the_cross_tab(page: Page, server_url: str) -> None:
    open_head_from_model(page, server_url, "cross", 2, 3)
    expected = head_answer(
        server_url, MODEL, text=SOURCE, target=TARGET, stack="cross", layer=2, head=3
    )
    assert expected["cross"] and expected["stack"] == "cross"
    steps = expected["heads"][0]
    source, target = expected["source_tokens"], expected["tokens"]
    assert len(source) != len(target)  # rows and columns cannot be confused
    for key in ("q", "k", "v", "attn_scores", "scaled_scores", "attn_weights", "context_vec"):
        assert flat(plot_data(page, f"plot-{key}")) == pytest.approx(flat(steps[key]), abs=1e-6)
    assert flat(plot_data(page, "plot-x")) == pytest.approx(flat(expected["x"]), abs=1e-6)
    wait_for_plot(page, "plot-source")
    assert flat(plot_data(page, "plot-source")) == pytest.approx(flat(expected["source"]), abs=1e-6)
    # Queries are the target's, keys and values the source's: the weights are T × S.
    weights = plot_data(page, "plot-attn_weights")
    assert len(weights) == len(target) and len(weights[0]) == len(source)
    assert all(v is not None for v in flat(weights))  # cross-attention masks nothing
    assert len(plot_data(page, "plot-k")) == len(source)
    expect(page.locator("[data-step='k'] .step-title")).to_have_text("k = source @ W_key")
    expect(page.locator("[data-step='v'] .step-title")).to_have_text("v = source @ W_value")
    expect(page.locator("[data-step='masked_scores'] .step-text")).to_contain_text(
        "No causal mask in cross-attention"
    )
    assert shown_steps(page).index("source") == shown_steps(page).index("k") - 1
    expect(page.get_by_test_id("real-head-title")).to_have_text(
        f"Cross-attention, decoder layer 2, head 3 of {MODEL}"
    )
    expect(page.get_by_test_id("real-head-facts")).to_contain_text(
        f"{MODEL}: marian encoder-decoder, cross-attention · {len(target)} target and "
        f"{len(source)} source tokens · layer 2, head 3"
    )
    # Back to /model on the same tab, target and head.
    page.get_by_test_id("real-back").click()
    stacks_card_shows(page, "cross", 2, 3)


def test_a_decoder_head_opens_from_the_decoder_tab(page: Page, server_url: str) -> None:
    open_head_from_model(page, server_url, "decoder", 1, 2)
    expected = head_answer(
        server_url, MODEL, text=SOURCE, target=TARGET, stack="decoder", layer=1, head=2
    )
    assert expected["causal"] and not expected["cross"]
    steps = expected["heads"][0]
    for key in ("q", "k", "v", "attn_scores", "context_vec"):
        assert flat(plot_data(page, f"plot-{key}")) == pytest.approx(flat(steps[key]), abs=1e-6)
    # The causal triangle: masked (blank) above the diagonal, the API's weights below.
    masked = plot_data(page, "plot-masked_scores")
    weights = plot_data(page, "plot-attn_weights")
    assert len(weights) == len(expected["tokens"]) == len(weights[0])
    for i, row in enumerate(weights):
        assert all(v is None for v in row[i + 1 :]), (i, row)
        assert all(v is None for v in masked[i][i + 1 :]), (i, masked[i])
        assert row[: i + 1] == pytest.approx(steps["attn_weights"][i][: i + 1], abs=1e-6)
    expect(page.get_by_test_id("real-head-title")).to_have_text(
        f"Decoder self-attention, layer 1, head 2 of {MODEL}"
    )
    expect(page.locator("[data-step='k'] .step-title")).to_have_text("k = x @ W_key")
    expect(page.locator("[data-step='masked_scores'] .step-text")).to_contain_text("decoder")
    assert "source" not in shown_steps(page)


def test_the_encoder_tab_opens_an_encoder_head(page: Page, server_url: str) -> None:
    open_head_from_model(page, server_url, "encoder", 2, 1)
    expected = head_answer(
        server_url, MODEL, text=SOURCE, target=TARGET, stack="encoder", layer=2, head=1
    )
    weights = plot_data(page, "plot-attn_weights")
    assert flat(weights) == pytest.approx(flat(expected["heads"][0]["attn_weights"]), abs=1e-6)
    assert len(weights) == len(expected["tokens"])  # the source's tokens
    expect(page.get_by_test_id("real-head-title")).to_have_text(
        f"Encoder self-attention, layer 2, head 1 of {MODEL}"
    )


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_t5_shows_its_relative_position_bias_as_a_step(
    page: Page, server_url: str, stack: str
) -> None:
    text, target = "the cat sat on the mat", "die Katze"
    page.goto(
        f"/?real=tiny-t5&text={quote(text)}&target={quote(target)}&stack={stack}&layer=1&head=2"
    )
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    expected = head_answer(
        server_url, "tiny-t5", text=text, target=target, stack=stack, layer=1, head=2
    )
    steps = expected["heads"][0]
    wait_for_plot(page, "plot-biased_scores")
    assert flat(plot_data(page, "plot-biased_scores")) == pytest.approx(
        flat(steps["biased_scores"]), abs=1e-5
    )
    text_of_step = page.locator("[data-step='biased_scores'] .step-text")
    if stack == "cross":  # T5's cross-attention has no relative positions: a bias of 0
        assert steps["biased_scores"] == steps["scaled_scores"]
        expect(text_of_step).to_contain_text("0 everywhere")
    else:
        assert steps["biased_scores"] != steps["scaled_scores"]  # the bias changed something
        expect(text_of_step).to_contain_text("learned bias for each distance")
    order = shown_steps(page)
    assert (
        order.index("scaled_scores") < order.index("biased_scores") < order.index("masked_scores")
    )
    expect(page.locator("[data-step='biased_scores'] .step-title")).to_have_text(
        "biased_scores = scaled_scores + bias"
    )
    facts = page.get_by_test_id("real-head-facts")
    if stack == "cross":
        expect(facts).not_to_contain_text("score bias")
    else:
        expect(facts).to_contain_text("a score bias")
    # T5 does not scale its scores: the caption says the model's own scale.
    expect(page.locator("[data-step='scaled_scores'] .step-text")).to_contain_text(
        "this model's scale"
    )
    assert "capped_scores" not in order


def test_gemma2_shows_its_soft_capping_as_a_step(page: Page, server_url: str) -> None:
    text = "the cat sat on the mat"
    page.goto(f"/?real=tiny-gemma2&text={quote(text)}&layer=2&head=1")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    expected = head_answer(server_url, "tiny-gemma2", text=text, layer=2, head=1)
    steps = expected["heads"][0]
    wait_for_plot(page, "plot-capped_scores")
    capped = plot_data(page, "plot-capped_scores")
    assert flat(capped) == pytest.approx(flat(steps["capped_scores"]), abs=1e-5)
    c = expected["softcap"]
    assert c == 2.0
    assert flat(capped) == pytest.approx(
        [c * math.tanh(v / c) for v in flat(steps["scaled_scores"])], abs=1e-5
    )
    assert max(abs(v) for v in flat(steps["scaled_scores"])) > c  # the cap did something
    order = shown_steps(page)
    assert (
        order.index("scaled_scores") < order.index("capped_scores") < order.index("masked_scores")
    )
    expect(page.locator("[data-step='capped_scores'] .step-title")).to_have_text(
        "capped_scores = 2 · tanh(scores / 2)"
    )
    expect(page.get_by_test_id("real-head-facts")).to_contain_text("soft-capped at 2")
    assert "biased_scores" not in order


def test_a_cross_head_fits_390_px(narrow: Page, server_url: str) -> None:
    open_marian(narrow, server_url)
    narrow.get_by_test_id("s2s-tab-cross").click()
    expect(narrow.get_by_test_id("s2s-open-head")).to_be_visible()
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    ARTIFACTS.mkdir(exist_ok=True)
    narrow.screenshot(path=str(ARTIFACTS / "model-seq2seq-open-head-390.png"), full_page=True)
    narrow.get_by_test_id("s2s-open-head").click()
    expect(narrow.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    wait_for_plot(narrow, "plot-source")
    assert narrow.evaluate("document.documentElement.scrollWidth") <= 390
    narrow.screenshot(path=str(ARTIFACTS / "real-head-cross-390.png"), full_page=True)
