"""Sustained load on a live server: throughput, latency, errors and memory growth, with wrk.

    .venv/bin/python bench/bench_load.py [--duration 60] [--connections 64]
    .venv/bin/python bench/bench_load.py --compare-threads [--compare-duration 15]

Starts ``python -m uvicorn app.main:create_app --factory`` (one worker) on a
free port of 127.0.0.1 and runs ``wrk --latency`` against it for ``--duration``
seconds over a mix of requests, rotated by ``bench/wrk/rotate.lua``:

- toy: the flagship ``POST /api/attention`` (bank-raw: stream bank mud, scale none),
- multihead: 16 tokens, hashed embeddings d=64, 4 heads, seeded_linear projection,
- compare: ``POST /api/compare`` river vs finance,
- lesson: ``GET /api/lessons/scaling`` with its defaults (about 1M samples),
- model: ``POST /api/model/attention`` on a ~30-word text, compact format, made
  unique per request (``%N%``) so the encoder's result cache never answers it
  (left out when the server has no ``/api/model``).

Every second the server's RSS is read from ``/proc/<pid>/status`` (VmRSS), and
``GET /healthz`` is timed from a separate connection (event-loop stalls show
there).  Reported: requests/s, p50/p99/max latency, non-2xx responses and
socket errors (timeouts included; ``--timeout``), status counts, mean RSS over
the first and last 10 s of the run and its growth (goal: < 10 %; the run
follows ``--warmup`` seconds of the same load, which fill the encoder's
bounded result cache: without it that filling reads as growth), the healthz
probe's p50 and max, and the load average before and after (the machine may
be shared).  Loopback only; the run is bounded by ``--duration`` and stops by
itself.

``--compare-threads`` instead measures torch's intra-op threads: short runs of
the toy mix and of the model request alone, each against a server with
``ATTENTION_VIZ_TORCH_THREADS=1`` (the default) and one with torch's own
default (one thread per core), alternating (and swapping which goes first
each round) so that load drift hits both; use an even ``--rounds``.

Needs ``wrk`` (Debian: ``apt-get install -y wrk``).  Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.server import start_server, stop_server  # noqa: E402

LUA = ROOT / "bench" / "wrk" / "rotate.lua"

TOY = {"tokens": ["stream", "bank", "mud"], "scale": "none"}
MULTIHEAD = {
    "tokens": (
        "the river bank was steep and the boat drifted past the old mill while children watched"
    ).split(),
    "embedding": {"kind": "hashed", "dim": 64, "seed": 0},
    "projection": {"kind": "seeded_linear", "d_out": 64, "seed": 789},
    "num_heads": 4,
}
COMPARE = {
    "tokens_a": ["stream", "bank", "mud"],
    "tokens_b": ["money", "bank", "loan"],
    "scale": "none",
}
MODEL_TEXT = (
    "Request %N%: after the storm the river rose over its bank, so the bank downtown "
    "closed early and the tellers walked home along the muddy path beside the water."
)
MODEL = {"text": MODEL_TEXT, "format": "compact"}

# name: (method, path, JSON body or None)
REQUESTS: dict[str, tuple[str, str, dict | None]] = {
    "toy": ("POST", "/api/attention", TOY),
    "multihead": ("POST", "/api/attention", MULTIHEAD),
    "compare": ("POST", "/api/compare", COMPARE),
    "lesson": ("GET", "/api/lessons/scaling", None),
    "model": ("POST", "/api/model/attention", MODEL),
}
MIXES = {
    "all": ["toy", "multihead", "compare", "lesson", "model"],
    "toy": ["toy", "multihead", "compare"],
    "model": ["model"],
}
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}


@dataclass
class WrkResult:
    requests_per_s: float
    latency_ms: dict[str, float]  # "50", "75", "90", "99", "max"
    requests: int
    non_2xx: int
    socket_errors: dict[str, int]
    statuses: dict[int, int]
    raw: str = field(repr=False)

    @property
    def errors(self) -> int:
        return self.non_2xx + sum(self.socket_errors.values())


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(number) * UNITS[unit]


def parse_wrk(out: str) -> WrkResult:
    latency = {m[0]: _ms(m[1]) for m in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M)}
    row = re.search(r"^\s+Latency\s+\S+\s+\S+\s+(\S+)", out, re.M)
    if row:
        latency["max"] = _ms(row[1])
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out
    )
    names = ("connect", "read", "write", "timeout")
    return WrkResult(
        requests_per_s=float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]),
        latency_ms=latency,
        requests=int(re.search(r"(\d+) requests in", out)[1]),
        non_2xx=int(m[1]) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0,
        socket_errors=dict(zip(names, map(int, sockets.groups()), strict=True))
        if sockets
        else dict.fromkeys(names, 0),
        statuses={int(c): int(n) for c, n in re.findall(r"^status (\d+) (\d+)$", out, re.M)},
        raw=out,
    )


def write_requests(names: list[str], directory: Path) -> Path:
    """The TSV that rotate.lua reads: NAME, METHOD, PATH, BODY per line."""
    lines = []
    for name in names:
        method, path, body = REQUESTS[name]
        text = orjson.dumps(body).decode() if body is not None else ""
        lines.append("\t".join([name, method, path, text]))
    target = directory / "requests.tsv"
    target.write_text("\n".join(lines) + "\n")
    return target


def run_wrk(
    url: str,
    requests_file: Path,
    *,
    duration: int,
    connections: int,
    threads: int = 2,
    timeout: str = "5s",
) -> WrkResult:
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency"]
    command += [f"--timeout={timeout}", "-s", str(LUA), url, "--", str(requests_file)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=duration + 60, check=False
    )
    if done.returncode != 0 or "Requests/sec" not in done.stdout:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    return parse_wrk(done.stdout)


def call(url: str, name: str, n: int = 0) -> tuple[int, float, int]:
    """One request alone: (status, seconds, response bytes)."""
    method, path, body = REQUESTS[name]
    data = None
    headers = {"accept-encoding": "gzip"}
    if body is not None:
        data = orjson.dumps(body).decode().replace("%N%", f"warm{n}").encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            size = len(response.read())
            return response.status, time.perf_counter() - start, size
    except urllib.error.HTTPError as exc:
        return exc.code, time.perf_counter() - start, 0


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (uvicorn's workers when --workers > 1)."""
    pids, queue = [], [pid]
    while queue:
        p = queue.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                queue.extend(int(c) for c in children)
        except OSError:
            pass
    return pids


def rss_mb(pid: int) -> float:
    """Summed VmRSS of ``pid`` and its descendants, in MiB (0 if gone)."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class Sampler(threading.Thread):
    """Every ``interval`` s: the server's RSS, and the latency of one GET /healthz."""

    def __init__(self, url: str, pid: int, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.pid, self.interval = url, pid, interval
        self.rss: list[tuple[float, float]] = []  # (seconds since start, MiB)
        self.healthz_ms: list[float] = []
        self.healthz_failures = 0
        self._halt = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self._halt.is_set():
            tick = time.monotonic()
            self.rss.append((tick - start, rss_mb(self.pid)))
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=10) as r:
                    r.read()
                self.healthz_ms.append((time.monotonic() - tick) * 1e3)
            except (urllib.error.URLError, OSError):
                self.healthz_failures += 1
            self._halt.wait(max(0.0, self.interval - (time.monotonic() - tick)))

    def stop(self) -> None:
        self._halt.set()
        self.join()


def rss_growth(samples: list[tuple[float, float]], window: float = 10.0) -> dict[str, float]:
    """Mean RSS over the first and the last ``window`` seconds, and the growth in %."""
    end = samples[-1][0]
    first = [mb for t, mb in samples if t < window]
    last = [mb for t, mb in samples if t > end - window]
    a, b = statistics.fmean(first), statistics.fmean(last)
    return {
        "first_mb": a,
        "last_mb": b,
        "growth_pct": 100 * (b - a) / a,
        "peak_mb": max(mb for _, mb in samples),
    }


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def has_model(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/model", timeout=120) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def check_alone(url: str, names: list[str]) -> None:
    """Each request once alone (and a few warm-ups): status, latency, size."""
    for name in names:
        for n in range(3):
            call(url, name, n)
        status, seconds, size = call(url, name, 99)
        print(f"  {name:10} alone: {status}  {seconds * 1e3:8.1f} ms  {size:>8} bytes")
        if status != 200:
            raise RuntimeError(f"{name} answered {status} alone; fix that before loading it")


def fmt_latency(r: WrkResult) -> str:
    lat = r.latency_ms
    return f"p50 {lat['50']:8.2f} ms  p99 {lat['99']:8.2f} ms  max {lat.get('max', 0):8.1f} ms"


def load_run(args: argparse.Namespace) -> int:
    env = {"ATTENTION_VIZ_TORCH_THREADS": str(args.torch_threads)} if args.torch_threads else {}
    url, process = start_server(env)
    try:
        names = list(MIXES.get(args.mix) or args.mix.split(","))
        if "model" in names and not has_model(url):
            print("  (no /api/model on this server: the model request is left out)")
            names.remove("model")
        check_alone(url, names)
        with tempfile.TemporaryDirectory() as tmp:
            tsv = write_requests(names, Path(tmp))
            cold_mb = rss_mb(process.pid)
            if args.warmup:
                # Fill what is bounded by design (the encoder's result cache, the
                # allocator's pools) so that growth in the run means a leak.
                run_wrk(
                    url,
                    tsv,
                    duration=args.warmup,
                    connections=args.connections,
                    threads=args.wrk_threads,
                    timeout=args.timeout,
                )
            warm_mb = rss_mb(process.pid)
            before = loadavg()
            sampler = Sampler(url, process.pid)
            sampler.start()
            result = run_wrk(
                url,
                tsv,
                duration=args.duration,
                connections=args.connections,
                threads=args.wrk_threads,
                timeout=args.timeout,
            )
            sampler.stop()
            after = loadavg()
        alive = process.poll() is None
    finally:
        stop_server(process)

    rss = rss_growth(sampler.rss)
    health = sorted(sampler.healthz_ms)
    print(
        f"\nmix: {', '.join(names)}   ({args.connections} connections, {args.duration} s "
        f"after {args.warmup} s of warm-up; wrk timeout {args.timeout})"
    )
    print(f"load average before: {before}   after: {after}   ({os.cpu_count()} cores)")
    print(f"requests/s: {result.requests_per_s:10.1f}   ({result.requests} requests)")
    print(f"latency:    {fmt_latency(result)}")
    print(
        f"errors:     {result.non_2xx} non-2xx, socket errors {result.socket_errors}"
        f"   statuses {dict(sorted(result.statuses.items()))}"
    )
    print(
        f"RSS:        first 10 s {rss['first_mb']:.1f} MiB, last 10 s {rss['last_mb']:.1f} MiB, "
        f"growth {rss['growth_pct']:+.1f} % (goal < 10 %), peak {rss['peak_mb']:.1f} MiB"
    )
    print(f"            (RSS before warm-up {cold_mb:.1f} MiB, after {warm_mb:.1f} MiB)")
    if health:
        print(
            f"healthz under load: p50 {statistics.median(health):.1f} ms, "
            f"max {health[-1]:.1f} ms, {sampler.healthz_failures} failed"
        )
    print(f"server alive at the end: {alive}")
    if args.verbose:
        print(result.raw)
    ok = result.errors == 0 and rss["growth_pct"] < 10 and alive
    print("PASS" if ok else "FAIL: errors, timeouts, RSS growth >= 10 % or a dead server")
    return 0 if ok else 1


def compare_threads(args: argparse.Namespace) -> int:
    """Toy mix and model alone, torch threads 1 vs torch's default, alternating."""
    servers = {
        "1 thread": start_server({"ATTENTION_VIZ_TORCH_THREADS": "1"}),
        f"{os.cpu_count()} threads": start_server(
            {"ATTENTION_VIZ_TORCH_THREADS": str(os.cpu_count())}
        ),
    }
    results: dict[tuple[str, str], list[WrkResult]] = {}
    try:
        model = all(has_model(url) for url, _ in servers.values())
        mixes = ["toy", "model"] if model else ["toy"]
        for label, (url, _) in servers.items():
            print(f"{label}:")
            for mix in mixes:
                check_alone(url, MIXES[mix])
        print(f"load average before: {loadavg()}")
        with tempfile.TemporaryDirectory() as tmp:
            for round_ in range(args.rounds):
                for mix in mixes:
                    tsv = write_requests(MIXES[mix], Path(tmp))
                    order = list(servers.items())
                    for label, (url, _) in order[:: -1 if round_ % 2 else 1]:  # alternate
                        r = run_wrk(
                            url,
                            tsv,
                            duration=args.compare_duration,
                            connections=args.connections,
                            threads=args.wrk_threads,
                            timeout=args.timeout,
                        )
                        results.setdefault((mix, label), []).append(r)
        print(f"load average after: {loadavg()}")
    finally:
        for _, process in servers.values():
            stop_server(process)
    print(
        f"\n{args.rounds} round(s) of {args.compare_duration} s, {args.connections} connections;"
        " medians over rounds"
    )
    for (mix, label), runs in results.items():
        rps = statistics.median(r.requests_per_s for r in runs)
        p50 = statistics.median(r.latency_ms["50"] for r in runs)
        p99 = statistics.median(r.latency_ms["99"] for r in runs)
        errors = sum(r.errors for r in runs)
        print(
            f"  {mix:6} {label:10} {rps:9.1f} req/s  p50 {p50:8.2f} ms  p99 {p99:8.2f} ms"
            f"  errors {errors}"
        )
    for mix in dict.fromkeys(m for m, _ in results):
        labels = [lbl for m, lbl in results if m == mix]
        one, many = (statistics.median(r.requests_per_s for r in results[mix, lb]) for lb in labels)
        print(f"  {mix}: req/s {labels[1]} / {labels[0]} = {many / one:.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds of load")
    parser.add_argument(
        "--warmup", type=int, default=30, help="seconds of the same load before measuring"
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--timeout", default="5s", help="wrk's per-request timeout")
    parser.add_argument(
        "--mix",
        default="all",
        help=f"a named mix ({', '.join(MIXES)}) or request names joined by commas "
        f"({','.join(REQUESTS)})",
    )
    parser.add_argument(
        "--torch-threads", type=int, help="ATTENTION_VIZ_TORCH_THREADS for the server"
    )
    parser.add_argument("--compare-threads", action="store_true")
    parser.add_argument("--compare-duration", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of --compare-threads")
    parser.add_argument("-v", "--verbose", action="store_true", help="print wrk's output")
    args = parser.parse_args()
    if args.mix not in MIXES and not set(args.mix.split(",")) <= set(REQUESTS):
        parser.error(f"--mix: unknown {args.mix!r}")
    if shutil.which("wrk") is None:
        sys.exit("bench_load.py needs wrk (Debian: apt-get install -y wrk)")
    return compare_threads(args) if args.compare_threads else load_run(args)


if __name__ == "__main__":
    raise SystemExit(main())
