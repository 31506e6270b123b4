"""Fixtures shared by every test directory: a live uvicorn server.

``live_server`` starts the app with ``devtools.server.start_server`` (uvicorn
on a free port, ``/healthz`` polled) and yields the base URL, e.g.
``http://127.0.0.1:41234``.  One server per test session; it is stopped at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devtools.server import start_server, stop_server


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """Base URL of a uvicorn process serving ``create_app()`` with default settings."""
    url, process = start_server()
    try:
        yield url
    finally:
        stop_server(process)
