"""Time from a fresh ``python -c`` process start to the encoder's first answer.

Each run is a new interpreter (subprocess) that imports the encoder, loads the
packaged checkpoint and encodes one sentence; the wall time of the whole
process is measured from the parent.  ``--app`` does the same through the web
app: ``create_app()`` and a first ``POST /api/model/attention``.  ``--serve`` does
what a new user does: ``attention-viz serve`` started, ``/healthz`` polled until it
answers, then the first ``POST /api/model/attention``.  Also printed: the child's own
split (imports, load, first forward) for the median run.  ``--record`` writes the
figures to bench/results/cold_start.json (bench/record.py).

    .venv/bin/python bench/cold_start.py [--runs 5] [--threads 1] [--app | --serve] [--record]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from record import machine, record

CHILD = """
import time, json
t0 = time.perf_counter()
import torch
torch.set_num_threads(THREADS)
from attention_core.models import Encoder
t1 = time.perf_counter()
encoder = Encoder.from_dir()
t2 = time.perf_counter()
out = encoder.encode("the river bank was muddy")
assert out.attentions.shape[0] == encoder.config.num_hidden_layers
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first_answer": t3 - t2}))
"""

# The web path: build the app, first POST /api/model/attention (the encoder
# loads lazily on that request unless the lifespan already loaded it).
APP_CHILD = """
import time, json
t0 = time.perf_counter()
from fastapi.testclient import TestClient
from app.main import create_app
t1 = time.perf_counter()
with TestClient(create_app()) as client:
    t2 = time.perf_counter()
    response = client.post("/api/model/attention", json={"text": "the river bank was muddy"})
    assert response.status_code == 200, response.text
    t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "app_start": t2 - t1, "first_answer": t3 - t2}))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def served_run() -> tuple[float, dict[str, float]]:
    """`attention-viz serve` from its start: seconds to /healthz, then to the first answer."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).parent / "attention-viz"), "serve", "--port", str(port)]
    start = time.perf_counter()
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None:
                    raise SystemExit(
                        "attention-viz serve exited before /healthz answered"
                    ) from None
                time.sleep(0.05)
        healthy = time.perf_counter()
        body = json.dumps({"text": "the river bank was muddy"}).encode()
        request = urllib.request.Request(
            f"{url}/api/model/attention", body, {"content-type": "application/json"}
        )
        urllib.request.urlopen(request, timeout=300).read()
        answered = time.perf_counter()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return answered - start, {"healthz": healthy - start, "first_answer": answered - healthy}


def record_figures(mode: str, runs: list[tuple[float, dict[str, float]]], command: str) -> None:
    totals = [t for t, _ in runs]
    split = ", ".join(f"{k} {v:.2f} s" for k, v in runs[len(runs) // 2][1].items())
    figure = {
        "library": "fresh process to the MiniLM encoder's first answer (library)",
        "app": "fresh process to the first POST /api/model/attention answer, in process "
        "(create_app, no server start)",
        "serve": "attention-viz serve started to its first POST /api/model/attention answer",
    }[mode]
    row = {
        "figure": figure,
        "value": round(statistics.median(totals), 2),
        "unit": "s",
        "note": f"median of {len(runs)} runs ({min(totals):.2f}-{max(totals):.2f} s); "
        f"in the median run: {split}",
        "machine": machine(),
        "command": command,
    }
    measures = (
        "Time from a fresh process start to the encoder's first answer: as a library, "
        "through the app in process (--app), or from `attention-viz serve` (--serve)."
    )
    run = ".venv/bin/python bench/cold_start.py [--runs 5] [--threads 1] [--app | --serve]"
    print(record("bench/cold_start.py", measures, run, [row]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads in the child (the app's default: 1)"
    )
    parser.add_argument(
        "--app", action="store_true", help="time the web app's first /api/model/attention answer"
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="time attention-viz serve to /healthz, then an answer",
    )
    parser.add_argument("--record", action="store_true", help="write bench/results/cold_start.json")
    args = parser.parse_args()
    child = APP_CHILD if args.app else CHILD.replace("THREADS", str(args.threads))
    runs = []
    for _ in range(args.runs):
        if args.serve:
            runs.append(served_run())
            continue
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", child],
            capture_output=True,
            text=True,
            check=True,
        )
        total = time.perf_counter() - start
        runs.append((total, json.loads(done.stdout.strip().splitlines()[-1])))
    runs.sort(key=lambda run: run[0])
    total, split = runs[len(runs) // 2]
    print(f"runs: {', '.join(f'{t:.2f}' for t, _ in runs)} s")
    print(f"median process start -> first answer: {statistics.median(t for t, _ in runs):.2f} s")
    print("  in the median run: " + ", ".join(f"{k} {v:.2f} s" for k, v in split.items()))
    if args.record:
        mode = "serve" if args.serve else "app" if args.app else "library"
        command = " ".join([".venv/bin/python bench/cold_start.py", *sys.argv[1:]])
        record_figures(mode, runs, command.replace(" --record", ""))


if __name__ == "__main__":
    main()
