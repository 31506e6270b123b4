"""What a model can be asked, declared by the model: nothing downstream asks its kind.

``Capabilities`` names the stacks its pass gives (first the one whose tokens
are the text), whether it writes (``generate``) and, when it has a word
vocabulary of its own, the ``WordModel`` that answers word questions.  The
refusals of fields a model has no use for are written here once, with the
reason in their message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from ...errors import SpecError
from ..maps.blocked_pass import BlockedPass
from ..maps.text_maps import TokenizedLike
from .outputs import LayerTrace

StackName = Literal["encoder", "decoder", "cross"]
STACK_NAMES: tuple[StackName, ...] = ("encoder", "decoder", "cross")
# An encoder-decoder's target: its text, or its ids as a generation answered them.
Target = str | tuple[int, ...]


@dataclass(frozen=True)
class WordComparison:
    """``cosines[l]``: cosine of the word's state in text A and text B after layer l
    (0 = embeddings).  ``span_*`` are token index ranges [start, stop)."""

    word: str
    pieces: tuple[str, ...]
    tokens_a: tuple[str, ...]
    tokens_b: tuple[str, ...]
    span_a: tuple[int, int]
    span_b: tuple[int, int]
    cosines: tuple[float, ...]


class WordModel(Protocol):
    """A model whose own vocabulary answers word questions (the BERT family's WordPiece)."""

    @property
    def hidden_size(self) -> int: ...

    def word_vectors(self, words: Sequence[str]) -> torch.Tensor: ...

    def word_pieces(self, words: Sequence[str]) -> list[tuple[str, ...]]: ...

    def compare_word(self, text_a: str, text_b: str, word: str) -> WordComparison: ...


@dataclass(frozen=True)
class StackTrace:
    """Every tensor of one attention layer of one stack: its rows' tokens, the layer's
    ``LayerTrace`` and, for ``cross``, the encoder's output (S, C) its keys and values
    come from with the source's tokens."""

    stack: StackName
    rows: TokenizedLike
    layer: LayerTrace
    source: torch.Tensor | None = None
    source_tokens: tuple[str, ...] = ()

    @property
    def causal(self) -> bool:
        return self.stack == "decoder"


@dataclass(frozen=True)
class Capabilities:
    """``stacks``: the names of the stacks a pass gives, first the text's; ``writes``:
    ``generate`` continues the text (or writes a target); ``words``: the word model."""

    stacks: tuple[StackName, ...]
    writes: bool = False
    words: WordModel | None = None

    @property
    def kind(self) -> str:
        """'encoder', 'decoder' or 'encoder-decoder': for messages that say why."""
        return self.stacks[0] if len(self.stacks) == 1 else "encoder-decoder"

    @property
    def reads_target(self) -> bool:
        """Whether the model takes a ``target`` (the decoder's text of an encoder-decoder)."""
        return len(self.stacks) > 1

    def described(self, name: str, family: str) -> str:
        """'NAME' is a FAMILY KIND."""
        return f"{name!r} is a {family} {self.kind}"

    def named(self, stack: StackName) -> StackName | None:
        """``stack`` where the model has several (an answer names it), None where one."""
        return stack if len(self.stacks) > 1 else None

    def stack(self, name: str | None) -> StackName:
        """The stack called ``name`` (None: the first); a ``SpecError`` on ``stack`` naming
        the ones this model has when it has none of that name."""
        for found in self.stacks:
            if name is None or found == name:
                return found
        have = ", ".join(repr(n) for n in self.stacks)
        raise SpecError(f"stack {name!r} does not exist; this model has {have}", field="stack")

    def check_fields(self, name: str, target: Target | None, stack: str | None = None) -> None:
        """A model with one stack takes no ``target`` (text or ids) and no ``stack`` but
        its own."""
        if self.reads_target:
            return
        kind = self.kind
        if isinstance(target, tuple):
            raise SpecError(
                f"target_ids (the decoder's ids) are for encoder-decoders (T5, BART, Marian); "
                f"{name!r} is {'an' if kind == 'encoder' else 'a'} {kind}",
                field="target_ids",
            )
        if target is not None:
            raise SpecError(
                f"target (the decoder's text) is for encoder-decoders (T5, BART, Marian); "
                f"{name!r} is {'an' if kind == 'encoder' else 'a'} {kind}: put the text in text",
                field="target",
            )
        if stack is not None and stack != kind:
            raise SpecError(
                f"stack {stack!r} is for encoder-decoders; {name!r} has one stack, its {kind} "
                f"(stack {kind!r} or none)",
                field="stack",
            )


class _OneStackModel(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def capabilities(self) -> Capabilities: ...

    def trace(
        self,
        text: str,
        layer: int,
        text_b: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> tuple[TokenizedLike, LayerTrace]: ...


class OneStack:
    """The contract's ``stack_trace`` and ``target_tokens`` of a model with one stack (its
    ``capabilities`` name it), written once from its ``trace``."""

    def stack_trace(
        self: _OneStackModel,
        text: str,
        layer: int,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        stack: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> StackTrace:
        """``trace`` as the contract asks it: the one stack's layer ``layer`` (0-based)."""
        capabilities = self.capabilities
        capabilities.check_fields(self.name, target, stack)
        rows, trace = self.trace(text, layer, text_b, blocked)
        return StackTrace(capabilities.stacks[0], rows, trace)

    def target_tokens(self: _OneStackModel, target: Target) -> int:
        """A model with one stack reads no target: refused."""
        self.capabilities.check_fields(self.name, target)
        return 0
