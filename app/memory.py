"""Keep the server's memory from creeping up under load: glibc's arenas and free pages.

Under mixed load the resident memory of one process grew run after run
(493 → 1,872 MB over four minutes, issue 20) although every cache is bounded:
glibc malloc gives each thread that allocates its own arena (up to 8 per core),
each arena keeps freed memory (``keep_freed_memory`` in app/model_registry.py
lets it keep up to 256 MB at its top, for speed), and the many short-lived
multi-megabyte buffers of the model answers (tensors, JSON, base64) fragment
them.  Two remedies, both settings:

- ``ATTENTION_VIZ_MALLOC_ARENA_MAX`` (default 2): at most that many arenas, set
  with ``mallopt`` before the thread pools start (as ``MALLOC_ARENA_MAX`` would);
- ``ATTENTION_VIZ_MALLOC_TRIM_SECONDS`` (default 10): a daemon thread hands free
  memory back to the system with ``malloc_trim(0)`` that often (ctypes releases
  the GIL: requests are not held up).

On a C library other than glibc both are no-ops.  bench/bench_mixed_load.py
``--part soak`` measures the effect.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

M_ARENA_MAX = -8  # glibc's mallopt parameter number


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - glibc only
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arena_max: int) -> bool:
    """``mallopt(M_ARENA_MAX, arena_max)``; False when not glibc or 0 (keep glibc's default)."""
    libc = _glibc()
    if libc is None or arena_max <= 0:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arena_max))


def trim() -> bool:
    """Return free heap memory to the system; True when some was released."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


class Trimmer(threading.Thread):
    """Calls :func:`trim` every ``seconds`` until :meth:`stop`."""

    def __init__(self, seconds: float) -> None:
        super().__init__(name="attention-viz-malloc-trim", daemon=True)
        self.seconds = seconds
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.seconds):
            trim()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread and wait for it (a trim under way finishes first): no thread of
        the app is left running when the process exits after the app's lifespan."""
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)


def start_trimmer(seconds: float) -> Trimmer | None:
    if seconds <= 0 or _glibc() is None:
        return None
    trimmer = Trimmer(seconds)
    trimmer.start()
    return trimmer
