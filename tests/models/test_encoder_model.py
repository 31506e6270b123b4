"""The encoder against Hugging Face transformers, and its input rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import attention_core.models.families.bert.model as encoder_model
from attention_core.attention import attention_with_steps
from attention_core.errors import SpecError
from attention_core.models.families.bert import Encoder

pytestmark = pytest.mark.model

HFRun = Callable[[tuple[int, ...], tuple[int, ...]], tuple[torch.Tensor, torch.Tensor]]

# [CLS] + 510 WordPieces + [SEP]: "word" is one WordPiece in MiniLM's vocabulary.
TEXT_512 = " ".join(["word"] * 510)

SENTENCES: dict[str, tuple[str, str | None]] = {
    "river": ("the river bank was muddy", None),
    "finance": ("The bank approved the loan.", None),
    "pieces": ("Tokenization splits unbelievably rare words, naïvely.", None),
    "pair": ("The bank approved the loan.", "Was it a good idea?"),
    "max_512": (TEXT_512, None),
}

TOLERANCE = 1e-5


def test_default_checkpoint_is_minilm(encoder: Encoder) -> None:
    info = encoder.info()
    assert (info.layers, info.heads, info.hidden) == (6, 12, 384)
    assert info.max_tokens == 512
    assert info.name == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.parametrize("name", list(SENTENCES))
def test_matches_transformers(encoder: Encoder, hf_run: HFRun, name: str) -> None:
    text, text_b = SENTENCES[name]
    out = encoder.encode(text, text_b)
    T = len(out.tokens)
    assert out.attentions.shape == (6, 12, T, T)
    assert out.hidden_states.shape == (7, T, 384)
    hf_attentions, hf_hidden = hf_run(out.tokenized.input_ids, out.tokenized.token_type_ids)
    assert (out.attentions - hf_attentions).abs().max().item() <= TOLERANCE
    assert (out.hidden_states - hf_hidden).abs().max().item() <= TOLERANCE
    torch.testing.assert_close(out.attentions.sum(-1), torch.ones(6, 12, T))


def test_every_layer_goes_through_attention_with_steps(
    encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        steps = attention_with_steps(*args, **kwargs)
        calls.append(steps.attn_weights)
        return steps

    monkeypatch.setattr(encoder_model, "attention_with_steps", spy)
    out = encoder.encode("a sentence no other test encodes, so it is not cached")
    assert len(calls) == 6
    for layer, weights in enumerate(calls):
        assert weights is out.layer_attentions[layer]


def test_tokens_and_pair_segments(encoder: Encoder) -> None:
    single = encoder.tokenize("The bank approved the loan.")
    assert single.tokens == ("[CLS]", "the", "bank", "approved", "the", "loan", ".", "[SEP]")
    assert set(single.token_type_ids) == {0}
    assert single.special == (True, *[False] * 6, True)

    pair = encoder.tokenize("The bank approved the loan.", "Was it wise?")
    assert pair.tokens[7:] == ("[SEP]", "was", "it", "wise", "?", "[SEP]")
    assert pair.token_type_ids == (0,) * 8 + (1,) * 5
    assert [i for i, s in enumerate(pair.special) if s] == [0, 7, 12]


def test_word_pieces_for_rare_words(encoder: Encoder) -> None:
    assert encoder.word_pieces(["tokenization", "bank"]) == [("token", "##ization"), ("bank",)]


def test_packaged_padding_and_truncation_are_off(encoder: Encoder) -> None:
    # The shipped tokenizer.json pads/truncates to 128; we must do neither.
    assert len(encoder.tokenize("hi")) == 3
    assert len(encoder.tokenize(" ".join(["word"] * 300))) == 302


def test_exactly_512_tokens_is_allowed(encoder: Encoder) -> None:
    assert len(encoder.tokenize(TEXT_512)) == 512


def test_513_tokens_is_an_error_naming_count_and_limit(encoder: Encoder) -> None:
    with pytest.raises(SpecError) as error:
        encoder.tokenize(TEXT_512 + " word")
    assert error.value.field == "text"
    assert "513" in error.value.message and "512" in error.value.message


def test_pair_over_the_limit_is_an_error(encoder: Encoder) -> None:
    with pytest.raises(SpecError, match=r"text and text_b are 514 .* limit is 512"):
        encoder.tokenize(TEXT_512, "word")


@pytest.mark.parametrize(
    ("text", "text_b", "field"),
    [("", None, "text"), ("   \n", None, "text"), ("fine", "", "text_b"), ("\x00", None, "text")],
)
def test_empty_input_is_an_error(
    encoder: Encoder, text: str, text_b: str | None, field: str
) -> None:
    with pytest.raises(SpecError) as error:
        encoder.encode(text, text_b)
    assert error.value.field == field


def test_unknown_model_dir_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError, match="does not exist") as error:
        Encoder.from_dir(tmp_path / "nope")
    assert error.value.field == "model_dir"
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SpecError, match="lacks tokenizer.json"):
        Encoder.from_dir(tmp_path)


def test_max_tokens_can_be_lowered_and_is_capped_at_the_positions() -> None:
    small = Encoder.from_dir(max_tokens=8)
    with pytest.raises(SpecError, match="limit is 8"):
        small.tokenize("one two three four five six seven")
    assert Encoder.from_dir(max_tokens=4096).max_tokens == 512
    with pytest.raises(SpecError) as error:
        Encoder.from_dir(max_tokens=2)
    assert error.value.field == "model_max_tokens"


def test_recent_results_are_reused_within_the_budget(encoder: Encoder) -> None:
    first = encoder.encode("cache me", "please")
    assert encoder.encode("cache me", "please") is first
    assert encoder.encode("cache me") is not first
    uncached = Encoder(encoder.config, encoder.tokenizer, encoder.embeddings, encoder.layers, 0)
    assert uncached.encode("cache me") is not uncached.encode("cache me")


def test_outputs_cannot_be_edited_in_place(encoder: Encoder) -> None:
    out = encoder.encode("the river bank was muddy")
    with pytest.raises(RuntimeError, match="[Ii]nference"):
        out.layer_attentions[0].zero_()
