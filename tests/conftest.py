"""Fixtures shared by every test directory: a live uvicorn server.

``live_server`` starts ``python -m uvicorn app.main:create_app --factory`` (the
project's .venv interpreter when there is one) on a free port, waits for
``/healthz`` and yields the base URL, e.g. ``http://127.0.0.1:41234``.  One
server per test session; it is stopped at the end.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
STARTUP_SECONDS = 60.0
# Debian's Chromium (``playwright install`` cannot download browsers here), with
# the flags that keep it off the network: shared by the e2e tests and the benches.
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited with code {process.returncode} before {url}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}/healthz did not answer within {timeout:.0f} s")


def launch(command: list[str], env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen]:
    """Run a server ``command`` (with ``--port`` appended) until /healthz answers.

    ``env`` is added to this process's environment. Returns (url, process).
    """
    port = free_port()
    process = subprocess.Popen(
        [*command, "--port", str(port)], cwd=ROOT, env={**os.environ, **(env or {})}
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, process, STARTUP_SECONDS)
    except BaseException:
        stop_server(process)
        raise
    return url, process


def start_server(env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen]:
    """Start uvicorn (one worker) with ``env`` added to the environment; return (url, process)."""
    python = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
    command = [python, "-m", "uvicorn", "app.main:create_app", "--factory"]
    command += ["--host", "127.0.0.1", "--log-level", "warning"]
    return launch(command, env)


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """Base URL of a uvicorn process serving ``create_app()`` with default settings."""
    url, process = start_server()
    try:
        yield url
    finally:
        stop_server(process)
