"""The text a model trains on: a character vocabulary, the train/val split, the bigram baseline.

As in the tutorials: the vocabulary is the text's distinct characters in code
point order, a character's id is its place in that list, and the last 10% of
the text is held out for validation.  One id more, ``<unk>``, is written into
the tokenizer so that text with characters the model never saw (typed on the
model page) still tokenizes; training never produces it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np
import torch

from ..errors import SpecError

DEFAULT_CORPUS = "bank_stories.txt"
UNKNOWN = "<unk>"
VAL_FRACTION = 0.1
# Add-k smoothing for the count bigram: the val split has pairs the train split never shows.
BIGRAM_SMOOTHING = 0.1


@cache
def default_text() -> str:
    """The shipped corpus (``data/bank_stories.txt``, CC0; see ``data/README.md``)."""
    return (resources.files(__package__) / "data" / DEFAULT_CORPUS).read_text(encoding="utf-8")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CharVocabulary:
    """Characters in code point order; ``<unk>`` has the id after the last character."""

    chars: tuple[str, ...]

    @classmethod
    def from_text(cls, text: str) -> CharVocabulary:
        return cls(tuple(sorted(set(text))))

    @property
    def size(self) -> int:
        """Embedding rows: the characters plus ``<unk>``."""
        return len(self.chars) + 1

    @property
    def unknown_id(self) -> int:
        return len(self.chars)

    def encode(self, text: str, field: str = "text") -> torch.Tensor:
        """Ids of ``text``, (len(text),) int64; a character outside the vocabulary is an error.

        The characters are sorted by code point, so an id is a binary search
        over the vocabulary's code points (a megabyte of text in milliseconds).
        """
        try:
            raw = text.encode("utf-32-le")
        except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from JSON "\ud800"
            raise SpecError(
                f"{field} is not valid Unicode: {exc.reason} at character {exc.start}", field=field
            ) from None
        points = np.frombuffer(raw, dtype="<u4").astype(np.int64)  # (N,)
        known = _code_points(self.chars)  # (V - 1,), ascending
        ids = np.searchsorted(known, points).clip(max=max(len(known) - 1, 0))
        missing = known[ids] != points if len(known) else np.ones(len(points), dtype=bool)
        if missing.any():
            unknown = sorted({chr(p) for p in points[missing].tolist()})
            raise SpecError(
                f"{field} has characters the training text does not: "
                f"{', '.join(repr(c) for c in unknown[:10])}",
                field=field,
            )
        return torch.from_numpy(ids)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] if i < len(self.chars) else UNKNOWN for i in ids)

    def tokenizer_json(self) -> dict[str, Any]:
        """A ``tokenizer.json`` that the ``tokenizers`` library reads as this vocabulary.

        A BPE model without merges splits any text into single characters; no
        normalizer or pre-tokenizer touches the text, and the ``Fuse`` decoder
        joins the characters back without spaces.
        """
        vocab = {c: i for i, c in enumerate(self.chars)}
        vocab[UNKNOWN] = self.unknown_id
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {
                    "id": self.unknown_id,
                    "content": UNKNOWN,
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": False,
                    "special": True,
                }
            ],
            "normalizer": None,
            "pre_tokenizer": None,
            "post_processor": None,
            "decoder": {"type": "Fuse"},
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": UNKNOWN,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": vocab,
                "merges": [],
            },
        }

    def tokenizer_config(self, max_length: int) -> dict[str, Any]:
        """A ``tokenizer_config.json`` that makes transformers' ``AutoTokenizer`` read
        ``tokenizer.json`` as it is (``PreTrainedTokenizerFast``), not as GPT-2's byte-level
        BPE (which the ``gpt2`` model type would otherwise imply and which drops spaces)."""
        return {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": UNKNOWN,
            "model_max_length": max_length,
            "clean_up_tokenization_spaces": False,
        }


@lru_cache(maxsize=8)
def _code_points(chars: tuple[str, ...]) -> np.ndarray:
    return np.array([ord(c) for c in chars], dtype=np.int64)


@dataclass(frozen=True)
class Corpus:
    """A text encoded once and split: ``train`` and ``val`` are (N,) int64 id tensors."""

    text: str
    vocabulary: CharVocabulary
    train: torch.Tensor
    val: torch.Tensor

    @property
    def sha256(self) -> str:
        return text_sha256(self.text)


def min_text_chars(block_size: int) -> int:
    """Each split needs one window of ``block_size + 1`` characters (inputs and targets)."""
    return 2 * (block_size + 1)


def make_corpus(text: str, block_size: int) -> Corpus:
    """Encode ``text`` and split it: the last 10% (at least ``block_size + 1`` characters) is val.

    Shapes: train (N_train,), val (N_val,) int64 ids.
    """
    if len(text) < min_text_chars(block_size):
        raise SpecError(
            f"text is {len(text)} characters; with block_size {block_size} it must be at least "
            f"{min_text_chars(block_size)} (train and validation each need block_size + 1)",
            field="text",
        )
    vocabulary = CharVocabulary.from_text(text)
    ids = vocabulary.encode(text)
    n_val = max(math.ceil(len(text) * VAL_FRACTION), block_size + 1)
    return Corpus(text, vocabulary, ids[: len(ids) - n_val], ids[len(ids) - n_val :])


def bigram_baseline(corpus: Corpus) -> float:
    """Val cross-entropy (nats per character) of the count bigram fitted on the train split.

    The best any model that sees only the current character can do (up to the
    add-k smoothing that unseen pairs need): the line a model with attention
    has to get under to show that it uses its context.
    """
    V = corpus.vocabulary.size
    counts = torch.full((V, V), BIGRAM_SMOOTHING, dtype=torch.float64)
    train = corpus.train
    pairs = torch.ones(len(train) - 1, dtype=torch.float64)
    counts.index_put_((train[:-1], train[1:]), pairs, accumulate=True)  # (V, V) counts
    log_probs = (counts / counts.sum(dim=1, keepdim=True)).log()  # (V, V): row = this char
    val = corpus.val
    return float(-log_probs[val[:-1], val[1:]].mean())


def default_probe(text: str, block_size: int, length: int = 48) -> str:
    """A probe for a text of the user's: the first sentence-like stretch of its validation split.

    Starts after the first line break or ". " near the split's beginning (so the
    probe opens like a sentence), at most ``min(length, block_size)`` characters.
    """
    n_val = max(math.ceil(len(text) * VAL_FRACTION), block_size + 1)
    tail = text[len(text) - n_val :]
    limit = min(length, block_size)
    for mark in ("\n", ". "):
        cut = tail.find(mark, 0, 2 * limit)
        if cut >= 0 and tail[cut + len(mark) :].strip():
            tail = tail[cut + len(mark) :]
            break
    probe = tail.lstrip()[:limit]
    return probe if probe.strip() else tail[:limit]
