"""Fixtures shared by every test directory: a live uvicorn server, headless Chromium.

``live_server`` starts the app with ``devtools.server.start_server`` (uvicorn
on a free port, ``/healthz`` polled) and yields the base URL, e.g.
``http://127.0.0.1:41234``.  One server per test session; it is stopped at the end.
"""

from __future__ import annotations

import os

# Triton kernels run in Triton's interpreter on the CPU (tests/models/test_gpu_pooled.py):
# Triton reads this when it is first imported.  Nothing else changes: the app takes the
# kernel on the CPU only where a test opts in (gpu_pooled.CPU_INTERPRETER).
os.environ.setdefault("TRITON_INTERPRET", "1")

from collections.abc import Iterator  # noqa: E402
from typing import TYPE_CHECKING

import pytest  # noqa: E402

from devtools.server import serving  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """Base URL of a uvicorn process serving ``create_app()`` with default settings."""
    with serving() as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the session (Playwright's sync API allows one per thread)."""
    from playwright.sync_api import sync_playwright

    from devtools.chromium import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
