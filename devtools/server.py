"""Run the app as a real server process: a free port, uvicorn, /healthz polled, then stopped.

``start_server()`` runs ``python -m uvicorn app.main:create_app --factory`` (the
project's ``.venv`` interpreter when there is one) and returns its base URL,
e.g. ``http://127.0.0.1:41234``, once ``/healthz`` answers 200;
``launch(command)`` does the same for any command that takes ``--port``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
STARTUP_SECONDS = 60.0

Server = subprocess.Popen[bytes]


def python_executable() -> str:
    """The project's ``.venv`` interpreter when there is one, else the running one.

    Console scripts (``uvicorn``, ``fastapi``) sit in the same directory.
    """
    return str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_healthy(url: str, process: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before {url}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}/healthz did not answer within {timeout:.0f} s")


def launch(
    command: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> tuple[str, Server]:
    """Run a server ``command`` (with ``--port`` appended) until /healthz answers.

    The command runs in ``cwd`` (the repository root unless told); ``env`` is added to
    this process's environment (a value of "" removes the variable). Returns (url,
    process); stop it with :func:`stop_server`.
    """
    port = free_port()
    environment = {k: v for k, v in {**os.environ, **(env or {})}.items() if v != ""}
    process = subprocess.Popen([*command, "--port", str(port)], cwd=cwd, env=environment)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, process, STARTUP_SECONDS)
    except BaseException:
        stop_server(process)
        raise
    return url, process


def start_server(env: dict[str, str] | None = None) -> tuple[str, Server]:
    """Start uvicorn (one worker) with ``env`` added to the environment; return (url, process)."""
    command = [python_executable(), "-m", "uvicorn", "app.main:create_app", "--factory"]
    command += ["--host", "127.0.0.1", "--log-level", "warning"]
    return launch(command, env)


def stop_server(process: Server) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def serving(env: dict[str, str] | None = None) -> Iterator[str]:
    """``start_server(env)`` for the length of the block: its base URL, stopped after."""
    url, process = start_server(env)
    try:
        yield url
    finally:
        stop_server(process)


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn from a thread of this process; its base URL.

    For tests that reach into the server (its loaded models) while a client talks to it
    over real sockets; ``start_server`` runs a separate process instead.
    """
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_SECONDS)
