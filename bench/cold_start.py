"""Time from a fresh ``python -c`` process start to the encoder's first answer.

Each run is a new interpreter (subprocess) that imports the encoder, loads the
packaged checkpoint and encodes one sentence; the wall time of the whole
process is measured from the parent.  ``--app`` does the same through the web
app: ``create_app()`` and a first ``POST /api/model/attention``.  Also printed:
the child's own split (imports, load, first forward) for the median run.

    .venv/bin/python bench/cold_start.py [--runs 5] [--threads 1] [--app]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads in the child (the app's default: 1)"
    )
    parser.add_argument(
        "--app", action="store_true", help="time the web app's first /api/model/attention answer"
    )
    args = parser.parse_args()
    child = APP_CHILD if args.app else CHILD.replace("THREADS", str(args.threads))
    runs = []
    for _ in range(args.runs):
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


if __name__ == "__main__":
    main()
