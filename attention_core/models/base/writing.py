"""What every model that writes gives back, whatever its kind: ``TextModel.write``.

A decoder continues its prompt; an encoder-decoder writes a target for its source
(the prompt).  Either way the answer is a ``Written``: the tokens written, why it
stopped, and ``reread``, the contract's pass (``ModelPass``) over what it read and
wrote, whose stacks the maps come from.  A model that cannot write (its
``capabilities.writes`` is false) refuses with ``refuse_writing``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypedDict

from ...errors import SpecError
from .capabilities import Capabilities
from .contract import ModelPass, PassOptions

StopReason = Literal["eos", "max_new_tokens"]


class Sampling(TypedDict, total=False):
    """How each new token is picked (``generate``'s keywords; see ``generation.sample``).

    ``temperature`` (default 0: greedy), ``top_k`` (default None: every token),
    ``seed`` of the sampler (default None: a random one).
    """

    temperature: float
    top_k: int | None
    seed: int | None


class Generated(Protocol):
    """What a family's own ``generate`` result says of the tokens it wrote."""

    @property
    def new_ids(self) -> tuple[int, ...]: ...
    @property
    def new_tokens(self) -> tuple[str, ...]: ...
    @property
    def text(self) -> str: ...
    @property
    def stop_reason(self) -> StopReason: ...
    @property
    def seed(self) -> int | None: ...


@dataclass(frozen=True)
class Written:
    """``read``: the tokens read before writing (the prompt, or the source); the written
    tokens' ids and texts, all of them decoded as ``text``; ``seed``: the sampler's (None:
    greedy); ``rows_written``: per row of the pass's first stack, whether the model wrote
    that token; ``reread(options)``: the pass over what was read and written."""

    read: int
    new_ids: tuple[int, ...]
    new_tokens: tuple[str, ...]
    text: str
    stop_reason: StopReason
    seed: int | None
    rows_written: tuple[bool, ...]
    reread: Callable[[PassOptions], ModelPass] = field(repr=False, compare=False)

    @classmethod
    def of(
        cls,
        result: Generated,
        read: int,
        rows_written: tuple[bool, ...],
        reread: Callable[[PassOptions], ModelPass],
    ) -> Written:
        """The contract's answer from a family's ``generate`` result."""
        return cls(
            read,
            result.new_ids,
            result.new_tokens,
            result.text,
            result.stop_reason,
            result.seed,
            rows_written,
            reread,
        )


def refuse_writing(name: str, family: str, capabilities: Capabilities) -> SpecError:
    """The error of asking a model that reads a whole text at once to write one."""
    return SpecError(
        f"{capabilities.described(name, family)}: it reads a whole text at once and cannot "
        "write one",
        field="model",
    )
