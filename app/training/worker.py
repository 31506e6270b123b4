"""The process one training run lives in: ``python -m app.training.worker``.

The server starts it per run (``runner.py``) and hands it the job as one JSON
object on stdin; it writes Server-Sent Event frames to stdout, which the
server relays as they come.  Its own process, so that torch's threads, its
memory and its CPU priority are its own: it lowers its priority (``nice``),
uses ``threads`` intra-op threads, and dies with the server (Linux
``PR_SET_PDEATHSIG``).  Killing it is how a run is stopped.

Exit codes: 0 after ``done``, 3 after an ``error`` event it wrote itself.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, BinaryIO

EXIT_ERROR_SENT = 3
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the server that started it exits."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def run(job: dict[str, Any], out: BinaryIO) -> int:
    import torch

    from attention_core import SpecError
    from attention_core.training import Done, TrainConfig, prune_runs, train

    from .sse import error_frame, event_frame

    torch.set_num_threads(int(job["threads"]))
    name = str(job["name"])
    save_to = Path(job["runs_dir"]) / name

    def send(data: bytes) -> None:
        out.write(data)
        out.flush()

    try:
        config = TrainConfig.from_dict(job["config"])
        events = train(config, job.get("text"), save_to=save_to, run_info=job.get("run_info"))
        for event in events:
            send(event_frame(event, name))
            if isinstance(event, Done):
                prune_runs(Path(job["runs_dir"]), int(job["keep"]))
    except SpecError as exc:
        send(error_frame(["body", *(exc.field or "body").split(".")], exc.message, "spec_error"))
        return EXIT_ERROR_SENT
    except Exception as exc:  # report, then let the server end the stream
        traceback.print_exc(file=sys.stderr)
        send(error_frame(["train"], f"the run failed: {type(exc).__name__}: {exc}", "run_failed"))
        return EXIT_ERROR_SENT
    return 0


def main() -> int:
    die_with_parent()
    job = json.loads(sys.stdin.buffer.read())
    os.nice(int(job.get("nice", 0)))
    # Frames go to the original stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        return run(job, out)
    except BrokenPipeError:  # the server went away
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
