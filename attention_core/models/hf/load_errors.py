"""What a failed transformers load says: a checkpoint's files are untrusted, so whatever
fails while transformers reads them is the files' fault, a ``SpecError`` naming them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import SpecError
from ...progress import Cancelled


@contextmanager
def files_at_fault(directory: Path) -> Iterator[None]:
    """Any failure inside as a ``SpecError`` on ``model`` naming ``directory`` and the
    failure; a cancel stays a cancel (the request's, not the checkpoint's)."""
    try:
        yield
    except Cancelled:
        raise
    except Exception as exc:
        raise SpecError(
            f"{directory.name}: transformers could not load it: {type(exc).__name__}: {exc}",
            field="model",
        ) from exc
