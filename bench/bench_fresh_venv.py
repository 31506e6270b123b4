"""How long the wheel test's fresh venv takes: the wheel built, a venv made, the wheel
installed, two ways side by side (issue 23).

- ``pth``: ``devtools.wheel.fresh_venv``: a venv without pip, the project's .venv's
  site-packages named by a ``.pth`` line, the wheel installed with ``--no-deps``.
- ``full`` (``--full``): a venv with pip, the wheel and every requirement installed
  from the machine's local wheel cache and indexes (pip's configuration), torch included.

Usage: PYTHONPATH=$PWD .venv/bin/python bench/bench_fresh_venv.py [--full]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devtools.wheel import build_wheel, clean_env, fresh_venv


def timed(label: str, fn) -> object:
    start = time.perf_counter()
    result = fn()
    print(f"{label:28} {time.perf_counter() - start:8.1f} s")
    return result


def main() -> None:
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        wheel = timed("build the wheel", lambda: build_wheel(base / "build"))
        timed("pth: venv + wheel --no-deps", lambda: fresh_venv(base / "pth", wheel))
        if "--full" in sys.argv:
            full = base / "full"

            def install() -> None:
                subprocess.run([sys.executable, "-m", "venv", str(full)], check=True)
                subprocess.run(
                    [str(full / "bin" / "pip"), "install", "-q", str(wheel)],
                    check=True,
                    env=clean_env(),
                    stderr=subprocess.DEVNULL,
                )

            timed("full: venv + every requirement", install)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
