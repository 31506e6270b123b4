"""The training processes a live server started, and waiting for one to exit.

A wait here is on the exit itself (a pidfd becomes readable when its process
ends), not a poll against a wall-clock guess: a test returns as soon as the
process is gone, and the bound it passes is only how long to wait before failing.
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

# Seconds a test waits for a killed or stopped process before it fails: a failure
# limit for a loaded 2-core machine, never a measure (a passing test waits far less).
EXIT_BOUND_S = 60.0


def workers_of(pid: int) -> list[int]:
    """PIDs of the training processes the server ``pid`` started (still running, not zombies)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"app.training.worker" in cmdline:
            found.append(int(stat.parent.name))
    return found


def exited(pid: int, bound_s: float = EXIT_BOUND_S) -> bool:
    """Whether process ``pid`` ends (or has ended) within ``bound_s``; waits on its exit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # gone (and reaped) already
    try:
        return bool(select.select([fd], [], [], bound_s)[0])
    finally:
        os.close(fd)


def all_exited(pids: list[int], bound_s: float = EXIT_BOUND_S) -> bool:
    """Whether every process of ``pids`` ends within ``bound_s`` in all."""
    deadline = time.monotonic() + bound_s
    return all(exited(pid, max(deadline - time.monotonic(), 0.0)) for pid in pids)
