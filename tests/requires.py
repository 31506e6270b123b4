"""A package a test needs: skipped on a developer's machine without it, a failure under CI.

CI (env ``CI=true``) installs ``.[model,test]``; a package missing there is a broken
install, not a reason to pass quietly.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """``module`` imported; without it ``pytest.fail`` under CI, ``pytest.skip`` elsewhere."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not installed ({exc}); `pip install -e .[model,test]`"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
