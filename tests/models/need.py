"""Optional packages a test needs: skipped locally without them, a failure under CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str) -> ModuleType:
    """``module`` imported; without it the test skips, or fails when ``CI`` is set."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is required under CI (pip install -e '.[transformers,test]')")
        pytest.skip(f"{module} is not installed")
        raise
