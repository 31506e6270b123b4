"""attention_viz.why and attention_viz.attribute: the API's answers as data (equal to the
core's), and a view that draws them in a browser without an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from playwright.sync_api import Browser

import app
from attention_core.analysis import head_model
from attention_core.analysis.attribution import attribute as core_attribute
from attention_core.analysis.qk_decomposition import why as core_why
from attention_core.errors import SpecError
from attention_core.models import GPT2, Decoder

BANK = Path(__file__).resolve().parents[2] / "attention_core/models/builtin/tiny-bank-gpt"
TEXT = "Kim counted the cash, then went to the bank "


def drawn(browser: Browser, view: app.NotebookView, tmp_path: Path) -> str:
    """The view's page opened offline: its text once drawn; asserts no console error."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(view.save(tmp_path / "view.html").as_uri())
        page.wait_for_selector("body[data-drawn='1']", timeout=30_000)
        text = page.inner_text("main")
    finally:
        page.close()
    assert errors == []
    return text


def test_why_is_the_cores_and_draws(browser: Browser, tmp_path: Path) -> None:
    result = app.why("tiny-bank-gpt", TEXT, 2, 1, 43, 19, top=5)
    decoder = Decoder.from_dir(BANK, GPT2.from_pretrained, "gpt2")
    heads = head_model(decoder)
    expected = core_why(heads, heads.tokenize(TEXT).ids, 1, 0, 43, 19)
    assert result["score"] == pytest.approx(expected.score)
    assert result["weight"] == pytest.approx(expected.weight) and result["weight"] > 0.8
    torch.testing.assert_close(torch.from_numpy(result["grid"]), expected.grid)
    assert len(result["contributions"]) == 5
    text = drawn(browser, result.view, tmp_path)
    assert "Why layer 2, head 1 looks from '␣' (row 43) at 'h' (column 19)" in text
    assert "layer 1 MLP at '␣'" in text and f"{result['weight']:.4f}" in text
    assert result._repr_html_().startswith("<iframe")


def test_attribute_is_the_cores_and_draws(browser: Browser, tmp_path: Path) -> None:
    result = app.attribute("tiny-bank-gpt", TEXT, "exact", "zero", (43, None))
    decoder = Decoder.from_dir(BANK, GPT2.from_pretrained, "gpt2")
    heads = head_model(decoder)
    expected = core_attribute(heads, heads.tokenize(TEXT).ids, "exact", "zero", (43, None))
    assert expected.exact is not None and result["target_text"] == "a"
    torch.testing.assert_close(torch.from_numpy(result["exact"]), expected.exact)
    torch.testing.assert_close(torch.from_numpy(result["estimate"]), expected.estimate)
    assert [(c["layer"], c["head"]) for c in result["confirmed"]] == [(2, 1), (1, 3), (1, 4)]
    text = drawn(browser, result.view, tmp_path)
    assert "estimate ranks L2 H1 first" in text and "exact ablation ranks L1 H3 first" in text


def test_atp_star_marks_the_cancelled_heads_in_the_view(browser: Browser, tmp_path: Path) -> None:
    result = app.attribute("tiny-bank-gpt", TEXT, "atp_star", "zero", (43, None))
    assert result["cancelled"] == [{"layer": 1, "head": 1}] and result["graddrop"] is not None
    text = drawn(browser, result.view, tmp_path)
    assert "GradDrop score (AtP*'s ranking, unsigned)" in text
    assert "⇄ Estimates that may be cancelled" in text and "⇄ L1 H1" in text
    assert "The 3 largest GradDrop scores, confirmed" in text


def test_an_encoder_is_refused_with_the_reason() -> None:
    with pytest.raises(SpecError, match="masked-language-model head"):
        app.attribute("sentence-transformers/all-MiniLM-L6-v2", "the river bank")


SOURCE = "The cat sat on the mat, and the cat was tired because the mat was hard."
TRANSLATION = "Die Katze sass auf der Matte."


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.models.seq2seq_checkpoints import make_seq2seq

    return make_seq2seq(tmp_path_factory.mktemp("notebook-why") / "marian", "marian", seed=4)


def test_an_encoder_decoders_why_and_attribution_are_the_cores_and_draw(
    browser: Browser, tmp_path: Path, marian: Path
) -> None:
    """A cross-attention cell (queries the decoder stream's, keys the encoder output's) and
    every stack's attribution patching of a Marian checkpoint: the core's numbers, drawn
    with the key side's names and the source's token, and the target's loss in words."""
    from attention_core.analysis.seq2seq_attribution import seq2seq_attribute
    from attention_core.analysis.seq2seq_heads import read
    from attention_core.analysis.seq2seq_why import seq2seq_why
    from attention_core.models.hf.seq2seq import EncoderDecoder

    model = EncoderDecoder.from_dir(marian, "marian")
    text = read(model, SOURCE, TRANSLATION)
    result = app.why(marian, SOURCE, 2, 1, 3, 2, target=TRANSLATION, stack="cross")
    expected = seq2seq_why(model, text, "cross", 1, 0, 3, 2)
    assert result["weight"] == pytest.approx(expected.weight)
    torch.testing.assert_close(torch.from_numpy(result["grid"]), expected.grid)
    assert result["key_components"] == list(expected.key_components or ())
    source_token = result["source_tokens"][2].replace(" ", "␣")
    view = drawn(browser, result.view, tmp_path)
    assert "Why the cross stack's layer 2, head 1 looks from" in view
    assert f"at '{source_token}' (column 2)" in view and "encoder layer 1 head" in view
    attributed = app.attribute(marian, SOURCE, target=TRANSLATION, stack="decoder")
    estimates = seq2seq_attribute(model, text, "decoder").estimates
    for stack, grid in estimates.items():
        torch.testing.assert_close(torch.from_numpy(attributed["stacks"][stack]), grid)
    view = drawn(browser, attributed.view, tmp_path)
    assert "the mean −log p of the target's tokens" in view and "decoder stack's heads" in view
