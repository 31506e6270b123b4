"""Cheap requests under expensive load, and memory over repeated load (issue 20, items 9-10).

    .venv/bin/python bench/bench_mixed_load.py --part latency [--rounds 2] [--duration 20]
    .venv/bin/python bench/bench_mixed_load.py --part soak [--rounds 4] [--duration 30]
    .venv/bin/python bench/bench_mixed_load.py --part long [--rounds 2] [--duration 20]
    .venv/bin/python bench/bench_mixed_load.py --part cancel [--rounds 6]

Each with ``--record``: its figures go to bench/results/bench_mixed_load.json
(``scripts/bench_table.py`` then rewrites the tables), replacing that part's rows.

``latency``: ``--rounds`` rounds; in each, for each server configuration
(``--servers``: ``after``, the app as shipped; ``before``, the model work on as
many threads as CPUs, as it was), in alternating order, a fresh server and two
phases of ``--duration`` s against it:

- **idle**: only the probes;
- **loaded**: the probes while ``wrk`` sends the whole mix of bench_load.py
  (toy, multihead, compare, the scaling lesson, a unique real-model request) over
  ``--connections`` connections, and one training run (the default ``gpt``
  preset, at its lower CPU priority) streams.

The probes are two clients of their own, one request at a time every 50 ms:
``POST /api/attention`` (the flagship) and ``GET /healthz``; their p50/p99 are
the figures (goal under load: attention p99 ≤ 250 ms, healthz p99 ≤ 50 ms).  Also
reported: wrk's throughput, the training run's longest silence between two
events, and the load average.

``soak``: ``--rounds`` rounds of ``--duration`` s of the loaded mix (without the
training run) against each server (``tuned``: as shipped; ``untuned``:
``ATTENTION_VIZ_MALLOC_ARENA_MAX=0`` and ``..._MALLOC_TRIM_SECONDS=0``, glibc's
defaults), alternating; the RSS of each after every round (and 3 s later).  A
plateau: the last rounds within 10 % of each other.

``long`` (issue 32): one server with a random GPT-2-small-shaped checkpoint and one
model thread; in each round two phases of ``--duration`` s: **idle** (the probes
only) and **long** (a client sends one long model request after another, a new
~1,000-token text each time, so the one model thread is always busy).  The probes:
``GET /`` (a page), ``GET /api/models`` (a listing) and ``GET /healthz``, one
request at a time every 50 ms each (goal: page and listing p99 ≤ 250 ms, healthz
p99 ≤ 50 ms, beside idle).

``cancel`` (issue 32 item 9): the same server; ``--rounds`` rounds of 10 generations
(GPT-2 small, 250 new tokens asked, maps kept) each closed after 20 tokens, then 5 s
of idle; the server's RSS after each round.  A plateau: the memory of a cancelled
generation is freed when it stops, not when a later request happens to run the
cyclic garbage collector.

Needs ``wrk`` (latency, soak).  Linux only (``/proc``).  Loopback only.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_load import TOY, check_alone, has_model, loadavg, rss_mb, run_wrk, write_requests  # noqa: E402

from devtools.server import start_server, stop_server  # noqa: E402

CPUS = len(os.sched_getaffinity(0))
Row = dict[str, object]
SERVERS = {
    "after": {},
    "before": {"ATTENTION_VIZ_MODEL_THREADS": str(CPUS)},
    "tuned": {},
    "untuned": {"ATTENTION_VIZ_MALLOC_ARENA_MAX": "0", "ATTENTION_VIZ_MALLOC_TRIM_SECONDS": "0"},
}
TRAIN = {"architecture": "gpt", "max_steps": 5000}  # the limit: it outlasts the phase


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


class Probe(threading.Thread):
    """One request at a time every ``interval`` s on a keep-alive connection; latencies in ms."""

    def __init__(self, url: str, method: str, path: str, body: dict | None, interval: float = 0.05):
        super().__init__(daemon=True)
        self.url, self.method, self.path, self.interval = url, method, path, interval
        self.body = orjson.dumps(body) if body is not None else None
        self.ms: list[float] = []
        self.failures = 0
        self._halt = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection(*host_port(self.url), timeout=30)
        headers = {"content-type": "application/json"} if self.body else {}
        while not self._halt.is_set():
            start = time.perf_counter()
            try:
                connection.request(self.method, self.path, body=self.body, headers=headers)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    self.failures += 1
                self.ms.append((time.perf_counter() - start) * 1e3)
            except (OSError, http.client.HTTPException):
                self.failures += 1
                connection.close()
                connection = http.client.HTTPConnection(*host_port(self.url), timeout=30)
            self._halt.wait(max(0.0, self.interval - (time.perf_counter() - start)))
        connection.close()

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join()
        ordered = sorted(self.ms)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("nan")
        return {
            "n": len(ordered),
            "p50": statistics.median(ordered) if ordered else float("nan"),
            "p99": p99,
            "max": ordered[-1] if ordered else float("nan"),
            "failures": self.failures,
        }


class TrainingRun(threading.Thread):
    """Streams one POST /api/train; records when each event arrived."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.times: list[float] = []
        self.events = 0
        self.status = 0
        self.connection = http.client.HTTPConnection(*host_port(url), timeout=120)

    def run(self) -> None:
        try:
            self.connection.request(
                "POST",
                "/api/train",
                body=orjson.dumps(TRAIN),
                headers={"content-type": "application/json"},
            )
            response = self.connection.getresponse()
            self.status = response.status
            for line in response:
                if line.startswith(b"event: "):
                    self.events += 1
                    self.times.append(time.monotonic())
        except (OSError, http.client.HTTPException, ValueError, AttributeError):
            pass  # closed by stop()

    def stop(self) -> dict[str, float]:
        end = time.monotonic()
        try:
            self.connection.sock.shutdown(2)  # type: ignore[union-attr]
        except (OSError, AttributeError):
            pass
        self.connection.close()
        self.join(timeout=10)
        marks = self.times[1:] + [end]  # from the first event (start) to the end
        gaps = (
            [b - a for a, b in zip(self.times, marks, strict=False)]
            if self.times
            else [float("nan")]
        )
        return {"status": self.status, "events": self.events, "longest_silence_s": max(gaps)}


def probes(url: str) -> list[Probe]:
    return [Probe(url, "POST", "/api/attention", TOY), Probe(url, "GET", "/healthz", None)]


def latency_phase(url: str, duration: int, tsv: Path | None, connections: int) -> dict[str, object]:
    running = probes(url)
    for probe in running:
        probe.start()
    train = wrk = None
    if tsv is not None:
        train = TrainingRun(url)
        train.start()
        time.sleep(3)  # the run's process starts (imports torch)
        wrk = run_wrk(url, tsv, duration=duration, connections=connections)
    else:
        time.sleep(duration)
    result: dict[str, object] = {
        "attention": running[0].stop(),
        "healthz": running[1].stop(),
        "load": loadavg(),
    }
    if train is not None and wrk is not None:
        result["training"] = train.stop()
        result["wrk_rps"] = wrk.requests_per_s
        result["wrk_errors"] = wrk.errors
    return result


def fmt(p: dict[str, float]) -> str:
    return (
        f"p50 {p['p50']:7.1f}  p99 {p['p99']:7.1f}  max {p['max']:7.1f} ms  "
        f"(n {p['n']:.0f}, failed {p['failures']:.0f})"
    )


def part_latency(args: argparse.Namespace) -> list[Row]:
    results: dict[tuple[str, str], list[dict[str, object]]] = {}
    names = args.servers.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name in names[:: -1 if round_ % 2 else 1]:  # alternate which goes first
                url, process = start_server({**SERVERS[name], "ATTENTION_VIZ_RUNS_DIR": tmp})
                try:
                    mix = ["toy", "multihead", "compare", "lesson"]
                    mix += ["model"] if has_model(url) else []
                    if round_ == 0:
                        check_alone(url, mix)
                    tsv = write_requests(mix, Path(tmp))
                    for phase, load in (("idle", None), ("loaded", tsv)):
                        r = latency_phase(url, args.duration, load, args.connections)
                        results.setdefault((name, phase), []).append(r)
                        print(f"round {round_ + 1} {name:7} {phase:7} {summary(r)}", flush=True)
                finally:
                    stop_server(process)
    print(
        f"\n{args.rounds} round(s), {args.duration} s per phase, {args.connections} wrk "
        f"connections, {CPUS} CPUs; medians over rounds"
    )
    medians: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    rates: dict[str, float] = {}
    for (name, phase), runs in results.items():
        med = medians[name, phase] = {
            probe: {
                key: statistics.median(r[probe][key] for r in runs)  # type: ignore[index]
                for key in ("p50", "p99", "max")
            }
            for probe in ("attention", "healthz")
        }
        line = (
            f"{name:7} {phase:7} /api/attention p50 {med['attention']['p50']:6.1f} p99 "
            f"{med['attention']['p99']:6.1f} ms; /healthz p50 {med['healthz']['p50']:6.1f} "
            f"p99 {med['healthz']['p99']:6.1f} ms"
        )
        if phase == "loaded":
            rps = rates[name] = statistics.median(float(r["wrk_rps"]) for r in runs)  # type: ignore[arg-type]
            events = [r["training"]["events"] for r in runs]  # type: ignore[index]
            line += f"; wrk {rps:.1f} req/s; training events per phase {events}"
        print(line)
    return latency_rows(args, medians, rates)


def ms(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def span(values: list[float]) -> str:
    low, high = f"{min(values):.0f}", f"{max(values):.0f}"
    return low if low == high else f"{low}-{high}"


def rounds(args: argparse.Namespace) -> str:
    return f"medians of {args.rounds} round(s) of {args.duration} s a phase"


def latency_rows(
    args: argparse.Namespace,
    medians: dict[tuple[str, str], dict[str, dict[str, float]]],
    rates: dict[str, float],
) -> list[Row]:
    """The loaded probes' p99 as shipped (``after``), beside ``before`` where it ran."""
    if ("after", "loaded") not in medians:
        return []
    after, idle = medians["after", "loaded"], medians.get(("after", "idle"))
    row: Row = {
        "figure": f"p99 of /api/attention / /healthz probes while wrk -c{args.connections} "
        "sends the whole mix and a run trains, as shipped",
        "value": f"{ms(after['attention']['p99'])} / {ms(after['healthz']['p99'])}",
        "unit": "ms",
        "goal": "<= 250 / <= 50 ms",
    }
    note = f"{rounds(args)}; wrk {rates['after']:.0f}"
    if ("before", "loaded") in medians:
        before = medians["before", "loaded"]
        row["baseline"] = "the model work on as many threads as CPUs, same run"
        row["baseline_value"] = (
            f"{ms(before['attention']['p99'])} / {ms(before['healthz']['p99'])} ms"
        )
        note += f" vs {rates['before']:.0f}"
    note += " req/s"
    if idle is not None:
        note += f"; idle {ms(idle['attention']['p99'])} / {ms(idle['healthz']['p99'])} ms"
    return [{**row, "note": note}]


def summary(r: dict[str, object]) -> str:
    text = (
        f"load {r['load']}\n   /api/attention {fmt(r['attention'])}\n"  # type: ignore[arg-type]
        f"   /healthz       {fmt(r['healthz'])}"  # type: ignore[arg-type]
    )
    if "training" in r:
        t = r["training"]
        text += (
            f"\n   wrk {r['wrk_rps']:.1f} req/s ({r['wrk_errors']} errors); training "
            f"(HTTP {t['status']:.0f}): {t['events']:.0f} events, longest silence "  # type: ignore[index]
            f"{t['longest_silence_s']:.1f} s"  # type: ignore[index]
        )
    return text


def part_soak(args: argparse.Namespace) -> list[Row]:
    names = args.servers.split(",")
    servers = {n: start_server(SERVERS[n]) for n in names}
    rss: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    try:
        url0 = next(iter(servers.values()))[0]
        mix = ["toy", "multihead", "compare", "lesson"] + (["model"] if has_model(url0) else [])
        with tempfile.TemporaryDirectory() as tmp:
            tsv = write_requests(mix, Path(tmp))
            for name, (url, process) in servers.items():
                check_alone(url, mix)
                print(f"{name}: {rss_mb(process.pid):.0f} MiB after warm-up requests")
            print(f"load average before: {loadavg()}")
            for round_ in range(args.rounds):
                order = list(servers.items())[:: -1 if round_ % 2 else 1]
                for name, (url, process) in order:
                    result = run_wrk(url, tsv, duration=args.duration, connections=args.connections)
                    after = rss_mb(process.pid)
                    time.sleep(3)
                    rss[name].append((after, rss_mb(process.pid)))
                    print(
                        f"round {round_ + 1} {name:8} {result.requests_per_s:7.1f} req/s  "
                        f"RSS {after:7.0f} MiB, 3 s later {rss[name][-1][1]:7.0f} MiB  "
                        f"(load {loadavg()})"
                    )
    finally:
        for _, process in servers.values():
            stop_server(process)
    print(
        f"\n{args.rounds} rounds × {args.duration} s, {args.connections} connections, alternating"
    )
    for name, values in rss.items():
        series = " → ".join(f"{a:.0f}" for a, _ in values)
        last = [a for a, _ in values[-2:]]
        print(
            f"  {name:8} RSS after each round: {series} MiB; last two differ by "
            f"{100 * (last[-1] - last[0]) / last[0]:+.1f} %"
        )
    return soak_rows(args, rss)


def series_of(values: list[float]) -> str:
    return " -> ".join(f"{v:.0f}" for v in values)


def soak_rows(args: argparse.Namespace, rss: dict[str, list[tuple[float, float]]]) -> list[Row]:
    """RSS after each round as shipped (``tuned``), beside glibc's defaults where they ran."""
    if "tuned" not in rss:
        return []
    row: Row = {
        "figure": "RSS after each round of wrk's whole mix (no training), bounded allocator",
        "value": series_of([a for a, _ in rss["tuned"]]),
        "unit": "MiB",
        "note": f"{args.rounds} round(s) of {args.duration} s, {args.connections} connections, "
        "the servers alternating",
    }
    if "untuned" in rss:
        row["baseline"] = "glibc's defaults, same run"
        row["baseline_value"] = series_of([a for a, _ in rss["untuned"]]) + " MiB"
    return [row]


LONG_PROBES = {"page": "/", "listing": "/api/models", "healthz": "/healthz"}


class LongRequests(threading.Thread):
    """One long model request after another (a fresh text each, never a cached answer)."""

    def __init__(self, url: str, model: str, text: str) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.text = url, model, text
        self.seconds: list[float] = []
        self.statuses: list[int] = []
        self._halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._halt.is_set():
            n += 1
            text = f"{n} {self.text}"
            body = orjson.dumps(
                {"model": self.model, "text": text, "format": "compact", "pool": 128}
            )
            connection = http.client.HTTPConnection(*host_port(self.url), timeout=600)
            start = time.perf_counter()
            try:
                connection.request(
                    "POST", "/api/model/attention", body, {"content-type": "application/json"}
                )
                response = connection.getresponse()
                response.read()
                self.statuses.append(response.status)
                self.seconds.append(time.perf_counter() - start)
            except (OSError, http.client.HTTPException):
                self.statuses.append(0)
            finally:
                connection.close()

    def stop(self) -> dict[str, object]:
        self._halt.set()
        self.join()
        return {
            "requests": len(self.seconds),
            "statuses": sorted(set(self.statuses)),
            "median_s": statistics.median(self.seconds) if self.seconds else float("nan"),
        }


def served_model() -> Path:
    """GPT-2 small, random, with a tokenizer, alone in its directory (bench_long.py's)."""
    from bench_long import served_dir

    return served_dir(Path(tempfile.gettempdir()) / "attention-viz-bench" / "mixed" / "gpt2")


def part_long(args: argparse.Namespace) -> list[Row]:
    from bench_long import text_of

    checkpoint = served_model()
    text = text_of(900, checkpoint)
    results: dict[str, list[dict[str, dict[str, float]]]] = {}
    seconds: list[float] = []  # each long phase's median request
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "ATTENTION_VIZ_MODELS": str(checkpoint.parent),
            "ATTENTION_VIZ_HF_CACHE": "0",
            "ATTENTION_VIZ_RUNS_DIR": tmp,
            "ATTENTION_VIZ_MODEL_THREADS": "1",
        }
        url, process = start_server(env)
        try:
            model = checkpoint.name
            for round_ in range(args.rounds):
                for phase in ("idle", "long"):
                    long = LongRequests(url, model, text) if phase == "long" else None
                    if long is not None:
                        long.start()
                        time.sleep(2)  # the first pass is running
                    running = {k: Probe(url, "GET", path, None) for k, path in LONG_PROBES.items()}
                    for probe in running.values():
                        probe.start()
                    time.sleep(args.duration)
                    measured = {k: probe.stop() for k, probe in running.items()}
                    results.setdefault(phase, []).append(measured)
                    extra = ""
                    if long is not None:
                        stopped = long.stop()
                        seconds.append(float(stopped["median_s"]))  # type: ignore[arg-type]
                        extra = f"; long requests {stopped}"
                    print(f"round {round_ + 1} {phase:5} (load {loadavg()}){extra}")
                    for k, m in measured.items():
                        print(f"   {LONG_PROBES[k]:12} {fmt(m)}", flush=True)
        finally:
            stop_server(process)
    print(
        f"\n{args.rounds} round(s), {args.duration} s per phase, {CPUS} CPUs; medians over rounds"
    )
    for phase, runs in results.items():
        cells = [
            f"{LONG_PROBES[k]} p50 {statistics.median(r[k]['p50'] for r in runs):6.1f} "
            f"p99 {statistics.median(r[k]['p99'] for r in runs):6.1f} ms"
            for k in LONG_PROBES
        ]
        print(f"{phase:5} " + "; ".join(cells))
    return long_rows(args, results, seconds)


def long_rows(
    args: argparse.Namespace,
    results: dict[str, list[dict[str, dict[str, float]]]],
    seconds: list[float],
) -> list[Row]:
    """The probes' p99 while long requests hold the model thread, beside idle."""

    def medians(phase: str, key: str) -> str:
        runs = results[phase]
        return " / ".join(ms(statistics.median(r[k][key] for r in runs)) for k in LONG_PROBES)

    return [
        {
            "figure": "p99 of GET / / GET /api/models / GET /healthz while one long model "
            "request after another (GPT-2 small, 900 tokens) holds the one model thread",
            "value": medians("long", "p99"),
            "unit": "ms",
            "baseline": "the same probes, idle, same server and run",
            "baseline_value": medians("idle", "p99") + " ms",
            "goal": "<= 250 / <= 250 / <= 50 ms",
            "note": f"{rounds(args)}; p50 {medians('long', 'p50')} ms (idle "
            f"{medians('idle', 'p50')}); a long request took {span(seconds)} s (each "
            "phase's median)",
        }
    ]


def cancel_generation(url: str, model: str, n: int) -> None:
    """Stream a generation and close the connection once 20 tokens are written."""
    body = orjson.dumps({"model": model, "prompt": f"the bank {n}", "max_new_tokens": 250})
    connection = http.client.HTTPConnection(*host_port(url), timeout=600)
    connection.request(
        "POST", "/api/model/generate/stream", body, {"content-type": "application/json"}
    )
    response = connection.getresponse()
    for line in response:
        if b'"stage":"generate","done":20,' in line:
            break
    connection.sock.shutdown(2)  # type: ignore[union-attr]
    connection.close()


def part_cancel(args: argparse.Namespace) -> list[Row]:
    checkpoint = served_model()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "ATTENTION_VIZ_MODELS": str(checkpoint.parent),
            "ATTENTION_VIZ_HF_CACHE": "0",
            "ATTENTION_VIZ_RUNS_DIR": tmp,
        }
        url, process = start_server(env)
        try:
            cancel_generation(url, checkpoint.name, -1)  # loads the model
            start = rss_mb(process.pid)
            print(f"start: {start:.0f} MiB")
            series = []
            for round_ in range(args.rounds):
                for n in range(10):
                    cancel_generation(url, checkpoint.name, 10 * round_ + n)
                time.sleep(5)
                series.append(rss_mb(process.pid))
                print(
                    f"round {round_ + 1}: 10 cancelled, RSS {series[-1]:.0f} MiB (load {loadavg()})"
                )
        finally:
            stop_server(process)
    print("RSS after each round: " + series_of(series) + " MiB")
    return [
        {
            "figure": "server RSS after each round of 10 generation streams closed mid-way "
            "(GPT-2 small, maps kept), 5 s idle after each",
            "value": series_of(series),
            "unit": "MiB",
            "baseline": "after the model's first generation",
            "baseline_value": f"{start:.0f} MiB",
            "note": f"{args.rounds} round(s)",
        }
    ]


PARTS = {"latency": part_latency, "soak": part_soak, "long": part_long, "cancel": part_cancel}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=list(PARTS), default="latency")
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, help="default: 2 (latency), 4 (soak)")
    parser.add_argument(
        "--servers", help="comma-separated: after,before (latency), tuned,untuned (soak)"
    )
    parser.add_argument("--record", action="store_true", help="write bench/results")
    args = parser.parse_args()
    args.rounds = args.rounds or {"latency": 2, "long": 2, "cancel": 6}.get(args.part, 4)
    args.servers = args.servers or ("after,before" if args.part == "latency" else "tuned,untuned")
    load_before = os.getloadavg()[0]
    rows = PARTS[args.part](args)
    if args.record:
        recorded(rows, f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    return 0


def recorded(rows: list[Row], load: str) -> None:
    """Write the part's rows (the same figures replaced) to bench/results."""
    from record import machine, record

    command = " ".join([".venv/bin/python bench/bench_mixed_load.py", *sys.argv[1:]])
    path = record(
        "bench/bench_mixed_load.py",
        "Cheap requests under expensive load, and memory over repeated load (issues 20, 32).",
        ".venv/bin/python bench/bench_mixed_load.py --part latency [--rounds 3] [--duration 15]; "
        "... --part soak [--rounds 4] [--duration 30]; ... --part long [--rounds 2] "
        "[--duration 20]; ... --part cancel [--rounds 6]; each [--record]",
        [
            {**row, "note": f"{row['note']}; {load}", "machine": machine(), "command": command}
            for row in rows
        ],
    )
    print(f"recorded {len(rows)} figure(s) in {path}; now: .venv/bin/python scripts/bench_table.py")


if __name__ == "__main__":
    raise SystemExit(main())
