"""The training text: the shipped corpus, the vocabulary, the split, the bigram baseline."""

from __future__ import annotations

import importlib.util
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from attention_core.errors import SpecError
from attention_core.training import (
    CharVocabulary,
    bigram_baseline,
    default_text,
    make_corpus,
    min_text_chars,
)
from attention_core.training.corpus import BIGRAM_SMOOTHING, default_probe

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_corpus_is_what_the_seeded_script_writes() -> None:
    script = load_script("make_corpus")
    assert script.make_corpus(seed=0, size=300_000) == default_text()
    assert script.make_corpus(seed=1, size=300_000) != default_text()


def test_shipped_corpus_is_small_and_has_a_licence() -> None:
    text = default_text()
    assert 250_000 <= len(text.encode("utf-8")) <= 1_000_000
    readme = (ROOT / "attention_core/training/data/README.md").read_text()
    assert "CC0" in readme and "make_corpus.py --seed 0" in readme


def test_every_bank_sentence_is_decided_by_an_earlier_word_only() -> None:
    """Before "bank" the words are the same for both senses; the cue comes earlier."""
    script = load_script("make_corpus")
    cues = {sense: s["cue"] for sense, s in script.SENSES.items()}
    endings = {sense: s["after"] for sense, s in script.SENSES.items()}
    sentences = [s for s in default_text().replace("\n", " ").split(". ") if " bank " in s]
    assert len(sentences) > 2000
    senses = Counter()
    for sentence in sentences:
        before, after = sentence.split(" bank ", 1)
        found = {sense for sense, words in cues.items() if any(w in before for w in words)}
        assert len(found) == 1, sentence
        (sense,) = found
        assert before.endswith(("to the", "down to the"))
        assert any(after.rstrip(".").endswith(e) for e in endings[sense]), sentence
        senses[sense] += 1
    assert 0.4 < senses["river"] / len(sentences) < 0.6


def test_vocabulary_is_the_sorted_characters_and_round_trips() -> None:
    vocab = CharVocabulary.from_text("hello world")
    assert vocab.chars == (" ", "d", "e", "h", "l", "o", "r", "w")
    assert vocab.size == 9 and vocab.unknown_id == 8
    ids = vocab.encode("hello")
    assert ids.dtype == torch.long and ids.tolist() == [3, 2, 4, 4, 5]
    assert vocab.decode(ids.tolist()) == "hello"
    assert vocab.decode([8]) == "<unk>"


def test_unknown_characters_and_lone_surrogates_name_the_field() -> None:
    vocab = CharVocabulary.from_text("abc")
    with pytest.raises(SpecError, match="probe has characters the training text does not: 'z'"):
        vocab.encode("abz", field="probe")
    with pytest.raises(SpecError, match="text is not valid Unicode") as info:
        vocab.encode("a\ud800")
    assert info.value.field == "text"


def test_tokenizer_json_reads_in_tokenizers_as_the_same_vocabulary(tmp_path: Path) -> None:
    text = default_text()[:5000] + "Ünïcødé ✓\n"
    vocab = CharVocabulary.from_text(text)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(vocab.tokenizer_json()), encoding="utf-8")
    tokenizer = Tokenizer.from_file(str(path))
    sample = text[1000:1400] + "Ünïcødé ✓"
    encoding = tokenizer.encode(sample)
    assert encoding.ids == vocab.encode(sample).tolist()
    assert encoding.offsets == [(i, i + 1) for i in range(len(sample))]
    assert tokenizer.decode(encoding.ids) == sample
    assert tokenizer.get_vocab_size() == vocab.size
    # A character the text never had becomes <unk>, flagged special; it does not vanish.
    unknown = tokenizer.encode("a€b")
    assert unknown.ids == [vocab.encode("a").item(), vocab.unknown_id, vocab.encode("b").item()]
    assert unknown.tokens[1] == "<unk>"
    assert tokenizer.get_added_tokens_decoder()[vocab.unknown_id].special


def test_split_is_ninety_ten_with_a_window_each() -> None:
    corpus = make_corpus("abcdefghij" * 100, block_size=8)
    assert len(corpus.train) == 900 and len(corpus.val) == 100
    assert corpus.vocabulary.decode(corpus.val[:10].tolist()) == "abcdefghij"
    small = make_corpus("ab" * 20, block_size=12)  # 10% would be 4: val takes block_size + 1
    assert len(small.val) == 13 and len(small.train) == 27
    assert min_text_chars(12) == 26


@pytest.mark.parametrize("text", ["", "abc", "x" * 129])
def test_text_shorter_than_two_windows_is_refused(text: str) -> None:
    with pytest.raises(SpecError, match=r"with block_size 64 it must be at least 130") as info:
        make_corpus(text, block_size=64)
    assert info.value.field == "text"


def test_bigram_baseline_is_the_smoothed_count_model() -> None:
    text = "the cat sat on the mat. " * 20 + "a bat ate the hat. " * 5
    corpus = make_corpus(text, block_size=8)
    vocab = corpus.vocabulary
    train = vocab.decode(corpus.train.tolist())
    val = vocab.decode(corpus.val.tolist())
    pairs = Counter(zip(train, train[1:], strict=False))
    firsts = Counter(train[:-1])
    total = 0.0
    for a, b in zip(val, val[1:], strict=False):
        p = (pairs[(a, b)] + BIGRAM_SMOOTHING) / (firsts[a] + BIGRAM_SMOOTHING * vocab.size)
        total -= math.log(p)
    assert bigram_baseline(corpus) == pytest.approx(total / (len(val) - 1), rel=1e-12)


def test_default_probe_starts_a_sentence_of_the_validation_split() -> None:
    text = "First line here.\n" * 30 + "Second kind of line.\n" * 10
    probe = default_probe(text, block_size=32)
    assert probe == "Second kind of line.\nSecond kind"
    assert len(default_probe(text, block_size=8)) == 8
