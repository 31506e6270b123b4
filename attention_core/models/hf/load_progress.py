"""transformers' own loading, reported as ``load`` progress, a layer at a time.

A model spread by accelerate (``base.placement``) is read while transformers
loads it (``from_pretrained`` walks every tensor, writes what fits nowhere to
the offload folder), not afterwards by ``weight_dtype.read_in``: a 16 GB load
takes minutes.  transformers 5 walks the tensors in one loop wrapped in its
``tqdm`` ("Loading weights"); ``reported_loading`` wraps that loop's iterable so
that each layer whose tensors are done is reported as ``("load", done,
layers)``, with the usual cancellation (``progress.report``).  The reports go
to the calling thread's reporter only (a ContextVar): other loads are not
affected.  A transformers without that loop (4.x) loads without reports.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...progress import report
from ..checkpoints.weight_dtype import LAYER_NUMBER

LOOP_MODULE = "transformers.core_model_loading"
LOOP_DESCRIPTION = "Loading weights"
_install_lock = threading.Lock()


def layer_of(name: str) -> int:
    """A tensor's layer number (-1: outside the layers: embeddings, final norm, head)."""
    match = LAYER_NUMBER.search(name)
    return int(match.group(1)) if match else -1


def reported(names: list[str]) -> Iterator[int]:
    """Indices 0..len(names)-1, reporting ``load`` as each new layer starts and at the end."""
    parts = len({layer_of(name) for name in names})
    seen: set[int] = set()
    for index, name in enumerate(names):
        layer = layer_of(name)
        if layer not in seen:
            if seen:
                report("load", len(seen), parts)
            seen.add(layer)
        yield index
    if seen:
        report("load", parts, parts)


def _reporting_tqdm(original: Callable[..., Any]) -> Callable[..., Any]:
    def tqdm(*args: Any, **kwargs: Any) -> Any:
        iterable = args[0] if args else kwargs.get("iterable")
        if kwargs.get("desc") != LOOP_DESCRIPTION or not isinstance(iterable, Iterable):
            return original(*args, **kwargs)
        items = list(iterable)
        names = [str(item[0]) if isinstance(item, tuple) else str(item) for item in items]
        bar = original(items, *args[1:], **kwargs)
        return (items[index] for index, _ in zip(reported(names), bar, strict=True))

    tqdm.attention_viz_reports = True  # type: ignore[attr-defined]
    return tqdm


def install() -> bool:
    """Wrap transformers' loading loop once (idempotent); False when this transformers
    has no such loop."""
    try:
        module = importlib.import_module(LOOP_MODULE)
    except ImportError:
        return False
    with _install_lock:
        current = getattr(module, "tqdm", None)
        if current is None:
            return False
        if not getattr(current, "attention_viz_reports", False):
            module.tqdm = _reporting_tqdm(current)  # type: ignore[attr-defined]
    return True
