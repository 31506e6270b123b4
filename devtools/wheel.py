"""Build the project's wheel and install it into a fresh virtual environment.

``build_wheel(out)`` builds from a copy of the sources a wheel ships (a stale
``build/`` in the checkout cannot leak into it), without build isolation (no index
needed). ``fresh_venv(directory, wheel)`` makes a venv without pip and installs the
wheel with ``--no-deps``; its dependencies (torch, FastAPI, …) come from the
project's ``.venv`` through a ``.pth`` line naming that venv's site-packages: that
adds the directory to ``sys.path`` after the fresh venv's own, without running its
``.pth`` files (so the checkout's editable install, which maps ``attention_viz`` to
``app/``, does not leak in). The wheel's own files are what ``attention_viz`` and
``attention_core`` import. Creating it takes about a second; installing torch and the
other requirements from the local wheel cache instead takes minutes (bench/README.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a wheel is built from (setup.py maps these directories to packages).
SOURCES = (
    "app",
    "attention_core",
    "static",
    "templates",
    "pyproject.toml",
    "setup.py",
    "README.md",
)


def clean_env() -> dict[str, str]:
    """This process's environment without PYTHONPATH (which would put the checkout first)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def build_wheel(out: Path, root: Path = ROOT) -> Path:
    """The wheel, built from a copy of ``root``'s sources into ``out``; returns its path."""
    source = out / "src"
    for name in SOURCES:
        path = root / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    dist = out / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(dist), str(source)],
        check=True,
        env=clean_env(),
    )
    (wheel,) = dist.glob("*.whl")
    return wheel


def fresh_venv(directory: Path, wheel: Path) -> Path:
    """A new venv at ``directory`` with ``wheel`` installed; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]  # this interpreter's: the project's .venv
    Path(purelib, "_attention_viz_deps.pth").write_text(deps + "\n", encoding="utf-8")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        env=clean_env(),
    )
    return python
