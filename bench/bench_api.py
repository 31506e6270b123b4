"""Throughput and latency of the JSON API against /healthz, side by side, with wrk.

    .venv/bin/python bench/bench_api.py [--rounds 3] [--duration 5] [--connections 16]

Starts three uvicorn processes (one worker each): ``inline``, the app as
shipped, where toy-sized traces run on the event loop; ``threadpool``, with
``ATTENTION_VIZ_INLINE_WORK=-1``, which sends every computation to the thread
pool; and ``inline-2threads``, with ``ATTENTION_VIZ_TORCH_THREADS`` set to the
CPU count (torch's own default).  Each round runs, one at a time, ``GET
/healthz``, the flagship ``POST /api/attention`` (the bank-raw preset: stream
bank mud, vocabulary, identity, scale none) and ``POST /api/compare`` (river vs
finance) against each server in turn, so drift in machine load hits all alike;
and, on ``inline``, ``GET /api/presets/bank-raw``, whose bytes are computed
once: a ceiling for what caching the flagship's response would give.
Reported: the median over rounds of requests/s, p50 and p99, and ratios to
the same server's /healthz.
Needs ``wrk`` (Debian: ``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.server import start_server, stop_server  # noqa: E402

FLAGSHIP = {
    "tokens": ["stream", "bank", "mud"],
    "embedding": {"kind": "vocabulary"},
    "projection": {"kind": "identity"},
    "scale": "none",
}
COMPARE = {
    "tokens_a": ["stream", "bank", "mud"],
    "tokens_b": ["money", "bank", "loan"],
    "embedding": {"kind": "vocabulary"},
    "projection": {"kind": "identity"},
    "scale": "none",
}
ENDPOINTS = {  # name: (path, JSON body or None for GET)
    "healthz": ("/healthz", None),
    "attention": ("/api/attention", FLAGSHIP),
    "compare": ("/api/compare", COMPARE),
    # Pre-serialized bytes (presets are cached): what a cached flagship could reach.
    "preset-get": ("/api/presets/bank-raw", None),
}
NO_CACHE = {"ATTENTION_VIZ_RESPONSE_CACHE_ENTRIES": "0"}
SERVERS = {
    # As shipped: repeated toy requests are answered from the answer cache.
    "cached": {},
    # Every request computed: inline on the event loop, or in the thread pool.
    "inline": NO_CACHE,
    "threadpool": {**NO_CACHE, "ATTENTION_VIZ_INLINE_WORK": "-1"},
    # As before ATTENTION_VIZ_TORCH_THREADS existed: torch's default, one thread per core.
    "inline-2threads": {**NO_CACHE, "ATTENTION_VIZ_TORCH_THREADS": str(os.cpu_count())},
}
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def lua_script(directory: Path, name: str, body: dict | None) -> Path | None:
    if body is None:
        return None
    path = directory / f"{name}.lua"
    payload = json.dumps(body, separators=(",", ":"))
    path.write_text(
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f"wrk.body = {json.dumps(payload)}\n"
    )
    return path


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * UNITS[unit]


def run_wrk(url: str, script: Path | None, args: argparse.Namespace) -> dict[str, float]:
    command = ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.duration}s"]
    command += ["--latency", "--timeout", "5s"]
    if script is not None:
        command += ["-s", str(script)]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{url}: {errors.group(1)} error responses\n{out}")
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50": _ms(re.search(r"\s50%\s+(\S+)", out).group(1)),
        "p99": _ms(re.search(r"\s99%\s+(\S+)", out).group(1)),
    }


def check_answers(url: str) -> None:
    """Each benchmarked request answers 200 before it is timed."""
    for path, body in ENDPOINTS.values():
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url + path, data=data)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200, (path, response.status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--servers", default=",".join(SERVERS), help=f"a subset of {','.join(SERVERS)}"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk not found: apt-get install -y wrk")

    servers = {}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {n: lua_script(Path(tmp), n, body) for n, (_, body) in ENDPOINTS.items()}
        try:
            for name in args.servers.split(","):
                servers[name] = start_server(SERVERS[name])
                check_answers(servers[name][0])
            for round_ in range(args.rounds):
                for server, (url, _) in servers.items():
                    for endpoint, (path, _) in ENDPOINTS.items():
                        if server != "inline" and endpoint == "preset-get":
                            continue  # no computation: the same on every server
                        figures = run_wrk(url + path, scripts[endpoint], args)
                        results.setdefault((server, endpoint), []).append(figures)
                        print(
                            f"round {round_ + 1} {server:10} {endpoint:9} "
                            f"{figures['rps']:8.0f} req/s  p50 {figures['p50']:6.2f} ms  "
                            f"p99 {figures['p99']:6.2f} ms",
                            flush=True,
                        )
                        time.sleep(0.5)
        finally:
            for _, process in servers.values():
                stop_server(process)

    median = {
        key: {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50", "p99")}
        for key, runs in results.items()
    }
    print(
        f"\nmedians of {args.rounds} rounds × {args.duration} s, "
        f"{args.connections} connections, 1 uvicorn worker, {os.cpu_count()} CPUs"
    )
    print("| server | endpoint | req/s | p50 ms | p99 ms | req/s ÷ healthz | p99 ÷ healthz |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (server, endpoint), m in median.items():
        base = median[(server, "healthz")]
        print(
            f"| {server} | {endpoint} | {m['rps']:.0f} | {m['p50']:.2f} | {m['p99']:.2f} "
            f"| {m['rps'] / base['rps']:.2f} | {m['p99'] / base['p99']:.2f} |"
        )
    inline = median[("inline", "attention")]
    if ("threadpool", "attention") in median:
        pool = median[("threadpool", "attention")]
        print(
            f"\nflagship inline ÷ thread pool: {inline['rps'] / pool['rps']:.2f}× req/s, "
            f"p99 {inline['p99']:.2f} vs {pool['p99']:.2f} ms"
        )
    ratio = inline["rps"] / median[("inline", "healthz")]["rps"]
    verdict = "meets" if ratio >= 0.85 and inline["p99"] <= 10 else "misses"
    print(f"goal (flagship ≥ 0.85 × healthz req/s, p99 ≤ 10 ms): {verdict} ({ratio:.2f})")
    if args.json:
        rows = [{"server": s, "endpoint": e, **m} for (s, e), m in median.items()]
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
