"""The command line's progress bar (``attention-viz train`` and ``attention-viz maps``)."""

from __future__ import annotations

BAR_WIDTH = 24


def draw_bar(done: int, total: int) -> str:
    """``[######------------------]``: ``done`` of ``total`` in ``BAR_WIDTH`` cells."""
    filled = round(BAR_WIDTH * done / max(total, 1))
    return "[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "]"
