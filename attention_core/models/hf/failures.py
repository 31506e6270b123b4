"""A transformers model whose capture fails on a request: refused with the reason, for good.

The load-time checks (every layer of every stack captured) and the listing's
dry run (``probe``) keep most such models from being offered; what still
fails inside a forward pass (an input shape no check foresaw) must not be a
500 either.  ``guarded`` runs a forward pass and turns any failure but a
``SpecError``, a cancel or a lack of memory into ``CaptureFailed``, after
telling the model's ``FailureWatch`` (the registry then lists the model as
unsupported with that reason).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from ...errors import SpecError
from ...progress import Cancelled, StopForward
from .capture import CaptureFailed

T = TypeVar("T")
MAX_REASON_CHARS = 200


class FailureWatch:
    """Who hears of a capture failure: ``listen`` sets the one callback (the registry's)."""

    def __init__(self) -> None:
        self._listener: Callable[[str], None] | None = None

    def listen(self, listener: Callable[[str], None]) -> None:
        self._listener = listener

    def fail(self, name: str, what: str) -> CaptureFailed:
        """The error to raise for ``what`` went wrong, the listener told first."""
        reason = f"{name}: its attention could not be captured ({what})"
        if self._listener is not None:
            self._listener(reason)
        return CaptureFailed(reason, field="model")


def guarded(watch: FailureWatch, name: str, run: Callable[[], T]) -> T:
    """``run()``; any failure not the input's, a cancel's or memory's is a ``CaptureFailed``."""
    try:
        return run()
    except (SpecError, Cancelled, StopForward, MemoryError, torch.OutOfMemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the model's code failed: said, never a 500
        text = str(exc)
        text = text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "…"
        raise watch.fail(name, f"{type(exc).__name__}: {text}") from exc
