"""Decoder tokens shown as the text they cover: no Ġ or ▁, special tokens flagged, limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from attention_core.errors import SpecError
from attention_core.models import TextTokenizer
from tests.models.checkpoints import BOS, EOS, byte_level_tokenizer, metaspace_tokenizer

TEXT = "The cat sat on the mat 😀 café"


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> TextTokenizer:
    path = tmp_path_factory.mktemp("byte-level") / "tokenizer.json"
    byte_level_tokenizer().save(str(path))
    return TextTokenizer(path, 64, "the model's context")


@pytest.fixture(scope="module")
def metaspace(tmp_path_factory: pytest.TempPathFactory) -> TextTokenizer:
    path = tmp_path_factory.mktemp("metaspace") / "tokenizer.json"
    metaspace_tokenizer().save(str(path))
    return TextTokenizer(path, 64)


def test_byte_level_tokens_are_the_text_they_cover(byte_level: TextTokenizer) -> None:
    tokenized = byte_level.encode(TEXT)
    assert any("Ġ" in p for p in tokenized.pieces)  # the vocabulary spells spaces so...
    assert not any("Ġ" in t for t in tokenized.tokens)  # ...but the shown tokens do not
    # The 4 bytes of the emoji (and é's 2) are tokens of their own; each shows its character.
    assert tokenized.tokens == (
        "The", " c", "at", " s", "at", " on", " the", " m", "at", " ",
        "😀", "😀", "😀", "😀", " c", "af", "é", "é",
    )  # fmt: skip
    # Without the repeated emoji, the tokens spell the text exactly.
    spelled = []
    for token, span in zip(tokenized.tokens, tokenized.offsets, strict=True):
        if not spelled or span != tokenized.offsets[len(spelled) - 1]:
            spelled.append(token)
        else:
            spelled.append("")
    assert "".join(spelled) == TEXT
    assert not any(tokenized.special)


def test_sentencepiece_tokens_show_spaces_and_flag_bos(metaspace: TextTokenizer) -> None:
    tokenized = metaspace.encode("the bank of the river")
    assert tokenized.pieces[0] == BOS and tokenized.tokens[0] == BOS
    assert tokenized.special == (True,) + (False,) * (len(tokenized) - 1)
    assert any("▁" in p for p in tokenized.pieces)
    assert tokenized.tokens == ("<s>", "the", " bank", " ", "o", "f", " the", " r", "ive", "r")


def test_a_special_token_typed_in_the_text_is_flagged(byte_level: TextTokenizer) -> None:
    tokenized = byte_level.encode(f"end{EOS}start")
    index = tokenized.tokens.index(EOS)
    assert tokenized.special[index] and sum(tokenized.special) == 1


def test_generated_tokens_show_what_they_add(byte_level: TextTokenizer) -> None:
    """Decoding one token more each time gives the prompt's own token texts back."""
    context = byte_level.encode("The cat").input_ids
    rest = byte_level.encode(" sat 😀 on café" + EOS)
    texts = byte_level.continuation(context, rest.input_ids)
    assert texts == list(rest.tokens)
    assert texts[-1] == EOS


@pytest.mark.parametrize("text", [" naïve for 東京for", " café, 😀for and 東京", "ïé東😀 for"])
def test_generated_multibyte_characters_split_over_tokens_match_the_prompt_texts(
    byte_level: TextTokenizer, text: str
) -> None:
    """A token with text of its own shows it (" na" + the ï its last byte starts shows
    "naï"); the tokens holding only bytes of a character share that character."""
    context = byte_level.encode("The").input_ids
    rest = byte_level.encode(text)
    assert len(set(rest.offsets)) < len(rest)  # some character is split over tokens
    assert byte_level.continuation(context, rest.input_ids) == list(rest.tokens)


def test_a_byte_that_completes_no_character_does_not_take_the_next_tokens_text(
    byte_level: TextTokenizer,
) -> None:
    """0xE6 starts a 3-byte character, but "for" follows: the byte shows U+FFFD alone."""
    context = byte_level.encode("The").input_ids
    lead = byte_level.encode("東").input_ids[0]  # the first byte of 東 (E6), alone
    (lead_text,) = byte_level.pieces([lead])
    assert lead_text == "æ"
    word = byte_level.encode(" for").input_ids
    texts = byte_level.continuation(context, [lead, *word])
    assert texts == ["\ufffd", *byte_level.encode(" for").tokens]
    # Two bytes of a 4-byte emoji, never finished, then "for": they share one U+FFFD.
    emoji = byte_level.encode("😀").input_ids[:2]
    expected = ["\ufffd", "\ufffd", *byte_level.encode(" for").tokens]
    assert byte_level.continuation(context, [*emoji, *word]) == expected
    # A byte left unfinished by a special token, and one at the very end.
    eos = byte_level.encode(EOS).input_ids
    assert byte_level.continuation(context, [lead, *eos, lead]) == ["\ufffd", EOS, "\ufffd"]


def test_limits_name_the_count_the_limit_and_its_source(byte_level: TextTokenizer) -> None:
    with pytest.raises(SpecError, match=r"prompt is \d+ tokens; the limit is 64 \(the model's"):
        byte_level.encode("word " * 80, field="prompt")
    with pytest.raises(SpecError, match="text is empty") as error:
        byte_level.encode("   ")
    assert error.value.field == "text"


def test_an_unreadable_tokenizer_names_its_directory(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(SpecError, match=f"{tmp_path.name}: cannot read tokenizer.json"):
        TextTokenizer(tmp_path / "tokenizer.json", 8)
