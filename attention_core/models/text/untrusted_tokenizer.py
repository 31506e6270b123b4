"""A checkpoint's ``tokenizer.json`` is an untrusted file: bounded, checked, and its
failures contained.

- **Size**: at most ``MAX_TOKENIZER_BYTES``, checked when listing (a ``stat``) and
  before reading.
- **Patterns**: the pre-tokenizer's and normalizer's regular expressions run on
  Oniguruma, which backtracks: a quantified group that holds a quantifier or an
  alternation (``(a+)+$``, ``(a|aa)*``) can take exponential time on a short text.
  Such a tokenizer is refused when loaded (no real tokenizer has one: GPT-2's,
  Llama 3's, Qwen's and SentencePiece's patterns quantify single classes only).
- **Expansion**: ``Replace`` normalizer steps that lengthen text multiply: ten
  ``Replace("a", "aa")`` turn 40 KB into 40 MB before the token limit is checked.
  Their worst-case product is at most ``MAX_EXPANSION``.
- **Panics**: ``tokenizers`` raises ``PanicException``, a ``BaseException`` (no
  ``except Exception`` catches it), for an unparsable component (a broken
  ``Precompiled`` normalizer) or a regex search that gives up.  Reading and every
  call on the tokenizer turn it into a ``SpecError`` naming the model; a failure
  while encoding is also remembered under the file's fingerprint
  (``tokenizer_failure``), so the registry lists the model as unsupported with
  the reason until the file changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ...errors import SpecError

if TYPE_CHECKING:
    from tokenizers import AddedToken, Encoding, Tokenizer

T = TypeVar("T")

MAX_TOKENIZER_BYTES = 64 * 2**20  # Gemma 3's, the largest common one: 33 MB
MAX_EXPANSION = 8
QUANTIFIERS = "*+{"

_lock = threading.Lock()
# tokenizer.json (resolved) -> (its size and mtime when it failed, the reason)
_failures: dict[Path, tuple[tuple[int, int], str]] = {}


class TokenizerFailed(SpecError):
    """The checkpoint's tokenizer failed (a panic inside ``tokenizers``)."""

    kind = "model_unsupported"


def is_panic(exc: BaseException) -> bool:
    """A Rust panic surfaced by pyo3 (``pyo3_runtime.PanicException``)."""
    return type(exc).__name__ == "PanicException"


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def remember_failure(path: Path, reason: str) -> None:
    stamp = _stamp(path)
    if stamp is not None:
        with _lock:
            _failures[path.resolve()] = (stamp, reason)


def tokenizer_failure(path: Path) -> str | None:
    """Why ``path`` (a tokenizer.json) failed before, while the file is unchanged; else None."""
    with _lock:
        known = _failures.get(path.resolve())
    if known is None or known[0] != _stamp(path):
        return None
    return known[1]


def check_tokenizer_size(path: Path) -> None:
    """A ``SpecError`` when ``path`` is over ``MAX_TOKENIZER_BYTES`` (a ``stat``, no read)."""
    size = path.stat().st_size
    if size > MAX_TOKENIZER_BYTES:
        raise SpecError(
            f"{path.parent.name}: {path.name} is {size} bytes; the limit is "
            f"{MAX_TOKENIZER_BYTES} (a tokenizer file this large is not one a model ships)",
            field="model",
        )


def _regexes(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Regex" and isinstance(value, str):
                yield value
            else:
                yield from _regexes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _regexes(value)


def backtracking_risk(pattern: str) -> bool:
    """Whether ``pattern`` quantifies a group that holds a quantifier or an alternation."""
    stack: list[bool] = []  # per open group: does it hold a quantifier or a '|'?
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":  # a class: skip to its end (a quantifier inside is a literal)
            i = _class_end(pattern, i)
            continue
        if char == "(":
            stack.append(False)
        elif char == ")" and stack:
            risky = stack.pop()
            if risky and i + 1 < len(pattern) and pattern[i + 1] in QUANTIFIERS:
                return True
            if stack:
                stack[-1] = stack[-1] or risky
        elif (char in QUANTIFIERS or char == "|") and stack:
            stack[-1] = True
        i += 1
    return False


def _class_end(pattern: str, start: int) -> int:
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _replaces(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "Replace":
            yield node
        for value in node.values():
            yield from _replaces(value)
    elif isinstance(node, list):
        for value in node:
            yield from _replaces(value)


def expansion(normalizer: Any) -> float:
    """The most the ``Replace`` steps of ``normalizer`` (its JSON) may lengthen a text."""
    factor = 1.0
    for step in _replaces(normalizer):
        pattern = step.get("pattern") or {}
        matched = pattern.get("String") if isinstance(pattern, dict) else None
        shortest = len(matched) if isinstance(matched, str) and matched else 1
        content = step.get("content")
        factor *= max(1.0, len(content) / shortest if isinstance(content, str) else 1.0)
    return factor


def check_components(name: str, tokenizer: Tokenizer) -> None:
    """The pre-tokenizer's and normalizer's patterns and expansion (see the module doc)."""
    parts = [
        orjson.loads(part.__getstate__())
        for part in (tokenizer.pre_tokenizer, tokenizer.normalizer)
        if part is not None
    ]
    for pattern in (p for part in parts for p in _regexes(part)):
        if backtracking_risk(pattern):
            raise SpecError(
                f"{name}: the tokenizer's pattern {pattern[:60]!r} repeats a group that itself "
                "repeats or alternates; such patterns can take exponential time on a short "
                "text (catastrophic backtracking), so this tokenizer is not used",
                field="model",
            )
    if tokenizer.normalizer is not None:
        factor = expansion(orjson.loads(tokenizer.normalizer.__getstate__()))
        if factor > MAX_EXPANSION:
            raise SpecError(
                f"{name}: the tokenizer's normalizer may lengthen a text {factor:g}-fold "
                f"(its Replace steps); the limit is {MAX_EXPANSION}",
                field="model",
            )


def guarded(path: Path, call: Callable[[], T]) -> T:
    """``call()``, a panic inside ``tokenizers`` turned into ``TokenizerFailed`` (remembered)."""
    try:
        return call()
    except BaseException as exc:
        if not is_panic(exc):
            raise
        reason = f"{path.parent.name}: its tokenizer failed ({str(exc)[:200]})"
        remember_failure(path, reason)
        raise TokenizerFailed(reason, field="model") from None


class GuardedTokenizer:
    """The calls the models make on a ``tokenizers.Tokenizer``, each through ``guarded``."""

    def __init__(self, path: Path, tokenizer: Tokenizer) -> None:
        self.path = path
        self._tokenizer = tokenizer

    def encode(self, *args: Any, **kwargs: Any) -> Encoding:
        return guarded(self.path, lambda: self._tokenizer.encode(*args, **kwargs))

    def encode_batch(self, *args: Any, **kwargs: Any) -> list[Encoding]:
        return guarded(self.path, lambda: self._tokenizer.encode_batch(*args, **kwargs))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return guarded(self.path, lambda: self._tokenizer.decode(list(ids), skip_special_tokens))

    def id_to_token(self, token_id: int) -> str | None:
        return self._tokenizer.id_to_token(token_id)

    def get_added_tokens_decoder(self) -> dict[int, AddedToken]:
        return self._tokenizer.get_added_tokens_decoder()

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return int(self._tokenizer.get_vocab_size(with_added_tokens=with_added_tokens))
