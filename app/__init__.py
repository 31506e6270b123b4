"""attention-viz: the web app and JSON API over attention_core, and the notebook API.

Installed, this package is ``attention_viz`` (in a checkout, ``app``): ``head_view``,
``model_view``, ``show``, ``explore`` and ``figure`` for notebooks, ``create_app`` for
ASGI servers, and ``attention_core``'s public names. They load on first use, so that
importing the app (``uvicorn app.main:app``) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

import attention_core
from attention_core import __version__

_NOTEBOOK = ("NotebookView", "explore", "figure", "head_view", "model_view", "show")

__all__ = ["__version__", "create_app", *_NOTEBOOK, *attention_core.__all__]


def __getattr__(name: str) -> Any:
    if name in _NOTEBOOK:
        return getattr(importlib.import_module(f"{__name__}.notebook"), name)
    if name == "create_app":
        return importlib.import_module(f"{__name__}.main").create_app
    if name in attention_core.__all__:
        return getattr(attention_core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
