"""Text to WordPiece tokens with the checkpoint's own ``tokenizer.json``.

The packaged tokenizer pads and truncates to 128; both are switched off here
and our own limit (the position-embedding size, 512 for MiniLM) is enforced
with an error that names the count, instead of silently cutting the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ....errors import EMPTY_INPUT, MODEL_CONTEXT, LimitExceeded, SpecError
from ...text.text_chars import check_text_chars
from ...text.text_tokenizer import read_tokenizer

if TYPE_CHECKING:
    from tokenizers import Encoding


@dataclass(frozen=True)
class Tokenized:
    """One model input.  All tuples have one entry per token (T of them)."""

    tokens: tuple[str, ...]
    input_ids: tuple[int, ...]
    token_type_ids: tuple[int, ...]  # 0 for [CLS] + text A + [SEP], 1 for text B + [SEP]
    special: tuple[bool, ...]  # True for [CLS] / [SEP]
    word_ids: tuple[int | None, ...]  # word index within its own text; None for specials
    offsets: tuple[tuple[int, int], ...]  # character span in its own text

    def __len__(self) -> int:
        return len(self.tokens)


class WordPieceTokenizer:
    """A thin wrapper over ``tokenizers.Tokenizer`` with limits and clear errors."""

    def __init__(self, path: Path, max_tokens: int, limit_setting: str = MODEL_CONTEXT) -> None:
        self._tokenizer = read_tokenizer(
            path,
            lambda exc: SpecError(f"cannot read tokenizer {str(path)!r}: {exc}", field="model_dir"),
        )
        self.max_tokens = max_tokens
        self.limit_setting = limit_setting
        self.special_ids = frozenset(
            i for i, added in self._tokenizer.get_added_tokens_decoder().items() if added.special
        )

    def id_pieces(self, ids: list[int]) -> list[str]:
        """The vocabulary strings of ``ids`` (WordPieces: ``##`` marks a word's inside)."""
        return [self._tokenizer.id_to_token(i) or "" for i in ids]

    def tokenize(self, text: str, text_b: str | None = None) -> Tokenized:
        """``[CLS] text [SEP]`` or ``[CLS] text [SEP] text_b [SEP]`` as WordPieces."""
        for field, part in (("text", text), ("text_b", text_b)):
            if part is not None:
                check_text_chars(part, field, self.max_tokens, self.limit_setting)
        if not text.strip():
            raise SpecError("text is empty; give at least one word", field="text", kind=EMPTY_INPUT)
        if text_b is not None and not text_b.strip():
            raise SpecError(
                "text_b is empty; give at least one word", field="text_b", kind=EMPTY_INPUT
            )
        encoding: Encoding = self._tokenizer.encode(text, text_b, add_special_tokens=True)
        sequences = [
            s
            for s, special in zip(encoding.sequence_ids, encoding.special_tokens_mask, strict=True)
            if not special
        ]
        for index, field in enumerate(("text", "text_b")[: 1 if text_b is None else 2]):
            if index not in sequences:
                raise SpecError(
                    f"{field} has no WordPiece tokens (only characters the tokenizer removes)",
                    field=field,
                )
        count = len(encoding.ids)
        if count > self.max_tokens:
            what = "text and text_b are" if text_b is not None else "text is"
            raise LimitExceeded(
                f"{what} {count} WordPiece tokens including [CLS] and [SEP]; "
                f"the limit is {self.max_tokens}",
                field="text",
                limit=self.max_tokens,
                found=count,
                setting=self.limit_setting,
                extra={"unit": "WordPiece tokens (with [CLS] and [SEP])"},
            )
        return Tokenized(
            tokens=tuple(encoding.tokens),
            input_ids=tuple(encoding.ids),
            token_type_ids=tuple(encoding.type_ids),
            special=tuple(bool(m) for m in encoding.special_tokens_mask),
            word_ids=tuple(encoding.word_ids),
            offsets=tuple(encoding.offsets),
        )

    def pieces(self, word: str, field: str = "word") -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The WordPieces (and ids) of ``word`` on its own, without [CLS]/[SEP]."""
        encoding = self._tokenizer.encode(word, add_special_tokens=False)
        if not encoding.ids:
            raise SpecError(
                f"{field} {word!r} has no WordPiece tokens (empty after normalization)",
                field=field,
            )
        return tuple(encoding.tokens), tuple(encoding.ids)

    def pieces_batch(
        self, words: list[str], field: str = "words"
    ) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
        encodings = self._tokenizer.encode_batch(words, add_special_tokens=False)
        result = []
        for i, (word, encoding) in enumerate(zip(words, encodings, strict=True)):
            if not encoding.ids:
                raise SpecError(
                    f"{field}[{i}] {word!r} has no WordPiece tokens (empty after normalization)",
                    field=field,
                )
            result.append((tuple(encoding.tokens), tuple(encoding.ids)))
        return result
