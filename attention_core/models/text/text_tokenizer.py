"""A decoder's text to token ids and back, with the checkpoint's own ``tokenizer.json``.

Tokens are shown as the text they cover, never as vocabulary strings: GPT-2's
byte-level pieces spell a space as ``Ġ`` and SentencePiece's as ``▁``, and a
byte-level piece may hold half of a UTF-8 character.  A prompt token shows the
characters its offsets cover in the prompt (the tokens that share one
character, such as the bytes of an emoji, each show that character); a
generated token shows what it adds to the decoded text, found by decoding the
sequence one token longer each time (incremental detokenization).  Special
tokens (BOS, EOS, ``<|endoftext|>``) show their own spelling and are flagged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import EMPTY_INPUT, MODEL_CONTEXT, SpecError
from .text_chars import check_text_chars, check_token_count
from .untrusted_tokenizer import (
    GuardedTokenizer,
    check_components,
    check_tokenizer_size,
    is_panic,
)

REPLACEMENT = "\ufffd"  # what a decoder gives for an incomplete UTF-8 sequence


def read_tokenizer(path: Path, unreadable: Callable[[Exception], SpecError]) -> GuardedTokenizer:
    """``tokenizers.Tokenizer`` from ``path`` with padding and truncation off (every
    family's texts are one sequence, bounded by our own limits), checked and guarded as
    an untrusted file (``untrusted_tokenizer``); ``unreadable(exc)`` is raised when the
    file cannot be read."""
    from tokenizers import Tokenizer  # lazy: keeps `import attention_core` light

    check_tokenizer_size(path)
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except BaseException as exc:  # tokenizers raises a bare Exception, or panics
        if not (isinstance(exc, Exception) or is_panic(exc)):
            raise
        raise unreadable(RuntimeError(str(exc)[:300])) from None
    check_components(path.parent.name, tokenizer)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return GuardedTokenizer(path, tokenizer)


@dataclass(frozen=True)
class TokenizedText:
    """One decoder input: every tuple has one entry per token."""

    input_ids: tuple[int, ...]
    tokens: tuple[str, ...]  # the text each token covers (special: its spelling)
    pieces: tuple[str, ...]  # the vocabulary strings (Ġ, ▁, <0xF0>...), for the curious
    special: tuple[bool, ...]
    offsets: tuple[tuple[int, int], ...]  # character span in the text ((0, 0) if added)

    def __len__(self) -> int:
        return len(self.input_ids)


class TextTokenizer:
    """``tokenizers.Tokenizer`` with the project's limits, errors and token texts.

    ``max_tokens``: tokens a text may become (special tokens included); the
    error names the count, the limit and ``limit_source`` (what sets it, in words;
    ``limit_setting`` names it for a client: ``MODEL_CONTEXT`` or ``MODEL_MAX_TOKENS``).
    """

    def __init__(
        self, path: Path, max_tokens: int, limit_source: str = "", limit_setting: str = ""
    ) -> None:
        self._tokenizer = read_tokenizer(
            path,
            lambda exc: SpecError(
                f"{path.parent.name}: cannot read {path.name} ({exc})", field="model"
            ),
        )
        self.max_tokens = max_tokens
        self.limit_source = limit_source
        self.limit_setting = limit_setting or MODEL_CONTEXT
        self.special_ids = frozenset(
            i for i, added in self._tokenizer.get_added_tokens_decoder().items() if added.special
        )

    @property
    def vocab_size(self) -> int:
        return int(self._tokenizer.get_vocab_size(with_added_tokens=True))

    def encode(self, text: str, field: str = "text", limit: int | None = None) -> TokenizedText:
        """Token ids of ``text`` with the tokenizer's own special tokens (e.g. Llama's BOS).

        ``limit`` (default ``max_tokens``) bounds the count; over it is an error
        naming ``field``, the count and the limit (its characters are bounded first:
        ``text_chars``).
        """
        limit = self.max_tokens if limit is None else limit
        check_text_chars(text, field, limit, self.limit_setting)
        if not text.strip():
            raise SpecError(
                f"{field} is empty; give at least one word", field=field, kind=EMPTY_INPUT
            )
        encoding = self._tokenizer.encode(text, add_special_tokens=True)
        ids = tuple(encoding.ids)
        if not ids:
            raise SpecError(f"{field} has no tokens", field=field)
        check_token_count(len(ids), field, limit, self.limit_source, self.limit_setting)
        special = tuple(
            bool(mask) or i in self.special_ids
            for i, mask in zip(ids, encoding.special_tokens_mask, strict=True)
        )
        offsets = tuple((int(a), int(b)) for a, b in encoding.offsets)
        tokens = tuple(
            self._shown(text, token_id, span, is_special)
            for token_id, span, is_special in zip(ids, offsets, special, strict=True)
        )
        return TokenizedText(ids, tokens, tuple(encoding.tokens), special, offsets)

    def _shown(self, text: str, token_id: int, span: tuple[int, int], special: bool) -> str:
        if special:
            return self._tokenizer.id_to_token(token_id) or ""
        covered = text[span[0] : span[1]]
        if covered:
            return covered
        return self._tokenizer.decode([token_id], skip_special_tokens=False)

    def continuation(self, context: Sequence[int], new_ids: Sequence[int]) -> list[str]:
        """The text each of ``new_ids`` adds after ``context`` (incremental detokenization).

        A token that decodes to text of its own shows that text.  Tokens that hold
        only some bytes of a character (a byte-level piece) wait for the token that
        completes it: they show that character, and the completing token shows it
        followed by its own text (``ä``, ``º``, ``¬for`` show ``京``, ``京``,
        ``京for``).  Bytes that never complete a character show ``\ufffd``, and the
        next token only its own text.  Special tokens show their spelling.
        """
        ids = list(context)
        shown = self._tokenizer.decode(ids, skip_special_tokens=False)
        texts: list[str] = []
        waiting: list[str] = []  # the decoded text after each token of an unfinished character
        for position, token_id in enumerate(new_ids):
            if token_id in self.special_ids:
                if waiting:
                    texts.extend(_run_texts(shown, waiting))
                    shown, waiting = waiting[-1], []
                texts.append(self._tokenizer.id_to_token(token_id) or "")
                ids.append(token_id)
                shown = self._tokenizer.decode(ids, skip_special_tokens=False)
                continue
            ids.append(token_id)
            full = self._tokenizer.decode(ids, skip_special_tokens=False)
            waiting.append(full)
            if full.endswith(REPLACEMENT) and position < len(new_ids) - 1:
                continue
            texts.extend(_run_texts(shown, waiting))
            shown, waiting = full, []
        return texts

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._tokenizer.id_to_token(i) or "" for i in ids]


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (decoders may rewrite a trailing space)."""
    if b.startswith(a):
        return len(a)
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _run_texts(shown: str, decoded: Sequence[str]) -> list[str]:
    """Each token's text in a run of tokens after the text ``shown``.

    ``decoded[j]``: the whole text decoded after token j; all but the last may end
    inside a character (with ``\ufffd``).  Token j's own text is what it makes
    final (the common prefix of ``decoded[j]`` and the run's last text grows),
    followed by the character its trailing bytes start if a later token completes
    it; a token that makes nothing final shares a character: the one a later
    token completes, or else the invalid byte sequence it extends.
    """
    final = decoded[-1]
    done = _common_prefix(shown, final)
    texts: list[str] = []
    for j, text in enumerate(decoded):
        last = j == len(decoded) - 1
        stable = len(final) if last else max(done, _common_prefix(text, final))
        unfinished = not last and len(text) > stable  # ends with bytes a later token completes
        if stable > done:
            texts.append(final[done : stable + unfinished])  # its text (and that character)
            done = stable
        elif unfinished:
            texts.append(final[stable : stable + 1])  # only bytes of that character
        elif j > 0:
            texts.append(final[done - 1 : done])  # more bytes of an invalid sequence
        else:
            texts.append("")
    return texts
