"""attention-viz: the web app and JSON API over attention_core, and the notebook API.

Installed, this package is ``attention_viz`` (in a checkout, ``app``): ``head_view``,
``model_view``, ``show``, ``explore``, ``figure``, ``why`` and ``attribute`` for
notebooks, ``create_app`` for ASGI servers, and ``attention_core``'s public names. Each
loads on first use, so that importing the app's modules (``uvicorn app.main:app``, the
CLI) costs nothing more.
"""

from __future__ import annotations

import importlib
from typing import Any

from .version import __version__ as __version__

_NOTEBOOK = (
    "Analysis",
    "NotebookView",
    "attribute",
    "explore",
    "figure",
    "head_view",
    "model_view",
    "show",
    "why",
)


def __getattr__(name: str) -> Any:
    if name in _NOTEBOOK:
        return getattr(importlib.import_module(f"{__name__}.notebook"), name)
    if name == "create_app":
        return importlib.import_module(f"{__name__}.main").create_app
    core = importlib.import_module("attention_core")
    if name == "__all__":  # `from attention_viz import *`
        return ["__version__", "create_app", *_NOTEBOOK, *core.__all__]
    if name in core.__all__:
        return getattr(core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
