"""Scale-out on one machine: requests/s with ``attention-viz serve --workers 1`` vs ``--workers 2``.

    .venv/bin/python bench/bench_workers.py [--duration 60] [--connections 64] [--rounds 1]

Starts both servers through the project's own CLI (``attention-viz serve
--workers N``, which hands uvicorn the factory as an import string) on free
ports of 127.0.0.1, checks that the 2-worker one really runs 2 worker
processes under its supervisor, then runs wrk (same settings as
bench/bench_load.py) on ``GET /healthz`` and on the flagship ``POST
/api/attention`` (bank-raw: stream bank mud, scale none) against each,
alternating servers so that drift in machine load hits both alike.  Printed:
requests/s, p50 and p99 per server and endpoint (medians over rounds), the
2-worker / 1-worker ratio, and the load average (wrk itself shares the cores).

Also checks that the app is stateless across workers: the same flagship
request answered by every worker gives the same bytes.

Needs ``wrk`` (Debian: ``apt-get install -y wrk``).  Loopback only; bounded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_load import (  # noqa: E402
    REQUESTS,
    WrkResult,
    loadavg,
    process_tree,
    rss_mb,
    run_wrk,
    write_requests,
)

from devtools.server import launch, stop_server  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "attention-viz"
REQUESTS["healthz"] = ("GET", "/healthz", None)
ENDPOINTS = ["healthz", "toy"]


def start_cli(workers: int) -> tuple[str, subprocess.Popen]:
    """``attention-viz serve --workers N``: the real CLI, as users start it."""
    command = [str(CLI) if CLI.exists() else "attention-viz", "serve", "--host", "127.0.0.1"]
    return launch(command + ["--workers", str(workers), "--log-level", "warning"])


def worker_pids(process: subprocess.Popen, expected: int, timeout: float = 60) -> list[int]:
    """The processes that serve: the server itself (1 worker) or the supervisor's children.

    uvicorn's supervisor also starts a ``multiprocessing`` resource tracker
    for its spawned workers; only the children whose command line is uvicorn's
    spawn entry point count.
    """
    deadline = time.monotonic() + timeout
    while True:
        if expected == 1:
            return [process.pid]
        pids = []
        for pid in process_tree(process.pid)[1:]:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"spawn_main" in cmdline or b"multiprocessing.spawn" in cmdline:
                if b"resource_tracker" not in cmdline:
                    pids.append(pid)
        if len(pids) >= expected or time.monotonic() > deadline:
            return pids
        time.sleep(0.5)


def distinct_answers(url: str, tries: int = 40) -> int:
    """Distinct bodies for the flagship over fresh connections (spread over the workers)."""
    method, path, body = REQUESTS["toy"]
    bodies = set()
    for _ in range(tries):
        request = urllib.request.Request(
            url + path,
            data=orjson.dumps(body),
            method=method,
            headers={"content-type": "application/json", "connection": "close"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            bodies.add(response.read())
    return len(bodies)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--timeout", default="5s")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_workers.py needs wrk (Debian: apt-get install -y wrk)")

    servers: dict[int, tuple[str, subprocess.Popen]] = {}
    results: dict[tuple[str, int], list[WrkResult]] = {}
    try:
        for workers in (1, 2):
            servers[workers] = start_cli(workers)
            pids = worker_pids(servers[workers][1], workers)
            url = servers[workers][0]
            rss = rss_mb(servers[workers][1].pid)
            print(
                f"--workers {workers}: {url}, worker pids {pids} "
                f"({len(pids)} worker process(es)), RSS of the tree {rss:.0f} MiB"
            )
            if len(pids) != workers:
                raise RuntimeError(f"expected {workers} worker processes, found {pids}")
        distinct = distinct_answers(servers[2][0])
        print(f"flagship over 40 fresh connections to --workers 2: {distinct} distinct body(ies)")
        before = loadavg()
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.rounds):
                for endpoint in ENDPOINTS:
                    tsv = write_requests([endpoint], Path(tmp))
                    for workers, (url, _) in servers.items():
                        results.setdefault((endpoint, workers), []).append(
                            run_wrk(
                                url,
                                tsv,
                                duration=args.duration,
                                connections=args.connections,
                                threads=args.wrk_threads,
                                timeout=args.timeout,
                            )
                        )
        after = loadavg()
    finally:
        for _, process in servers.values():
            stop_server(process)

    print(
        f"\n{args.rounds} round(s) of {args.duration} s, {args.connections} connections, "
        f"{args.wrk_threads} wrk threads on {os.cpu_count()} cores; medians over rounds"
    )
    print(f"load average before: {before}   after: {after}")
    for endpoint in ENDPOINTS:
        rps = {}
        for workers in (1, 2):
            runs = results[endpoint, workers]
            rps[workers] = statistics.median(r.requests_per_s for r in runs)
            p50 = statistics.median(r.latency_ms["50"] for r in runs)
            p99 = statistics.median(r.latency_ms["99"] for r in runs)
            errors = sum(r.errors for r in runs)
            print(
                f"  {endpoint:8} --workers {workers}: {rps[workers]:9.1f} req/s  "
                f"p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  errors {errors}"
            )
        print(f"  {endpoint:8} workers 2 / workers 1 = {rps[2] / rps[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
