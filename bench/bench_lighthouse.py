"""Lighthouse on every page (default mobile preset), against a local server, offline.

Lighthouse 12 is installed by npm into bench/lighthouse/ (``npm ci`` from the
committed package.json and package-lock.json, the first time this runs; its
node_modules are not committed). It drives Debian's Chromium
(``CHROME_PATH=/usr/bin/chromium``, headless, the same network-quiet flags as
the tests) against a uvicorn this script starts (or ``--url``). The default
preset is Lighthouse's mobile one: a 412×823 screen, simulated slow 4G
(150 ms RTT, 1.6 Mbit/s) and a 4× slower CPU.

Prints, per page, the median over ``--runs``: the performance, accessibility,
best-practices and SEO scores, and LCP, TBT and CLS.

Usage: .venv/bin/python bench/bench_lighthouse.py [--runs 3] [--url http://127.0.0.1:8000]
       [--pages /,/compare,/lessons,/model,/train] [--preset mobile|desktop] [--json out.json]
       [--record]

``--record`` writes the medians into bench/results/bench_lighthouse.json (bench/record.py:
one figure per set of pages and preset); ``scripts/bench_table.py`` renders the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.server import start_server, stop_server  # noqa: E402

LIGHTHOUSE_DIR = Path(__file__).resolve().parent / "lighthouse"
LIGHTHOUSE_CLI = LIGHTHOUSE_DIR / "node_modules" / "lighthouse" / "cli" / "index.js"
PAGES = ["/", "/compare", "/lessons", "/model", "/train"]
CATEGORIES = ["performance", "accessibility", "best-practices", "seo"]


def ensure_lighthouse() -> None:
    if not LIGHTHOUSE_CLI.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=LIGHTHOUSE_DIR, check=True)


def lighthouse(url: str, preset: str) -> dict[str, Any]:
    flags = ["--headless=new", *CHROMIUM_ARGS]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        command = [
            "node",
            str(LIGHTHOUSE_CLI),
            url,
            "--output=json",
            f"--output-path={out}",
            "--quiet",
            f"--chrome-flags={' '.join(flags)}",
            f"--only-categories={','.join(CATEGORIES)}",
            "--no-enable-error-reporting",
        ]
        if preset == "desktop":
            command.append("--preset=desktop")
        env = {**os.environ, "CHROME_PATH": CHROMIUM}
        # Lighthouse sometimes loses the trace of a load (NO_NAVSTART): run that page again.
        for attempt in range(3):
            if subprocess.run(command, env=env, cwd=tmp).returncode == 0:
                break
            print(f"lighthouse failed on {url} (attempt {attempt + 1} of 3)", file=sys.stderr)
        else:
            raise SystemExit(f"lighthouse failed three times on {url}")
        report = json.loads(out.read_text())
    audits = report["audits"]
    row = {c: round(100 * (report["categories"][c]["score"] or 0)) for c in CATEGORIES}
    row["lcp_ms"] = audits["largest-contentful-paint"]["numericValue"]
    row["tbt_ms"] = audits["total-blocking-time"]["numericValue"]
    row["cls"] = audits["cumulative-layout-shift"]["numericValue"]
    row["fcp_ms"] = audits["first-contentful-paint"]["numericValue"]
    row["si_ms"] = audits["speed-index"]["numericValue"]
    row["long_tasks"] = [
        (t.get("url", "")[-40:], round(t["duration"]), round(t.get("startTime", 0)))
        for t in (audits.get("long-tasks", {}).get("details") or {}).get("items", [])
    ]
    row["work"] = {
        i["group"]: round(i["duration"])
        for i in (audits.get("mainthread-work-breakdown", {}).get("details") or {}).get("items", [])
    }
    row["failed"] = sorted(
        a["id"]
        for a in audits.values()
        if a.get("score") is not None and a["score"] < 1 and a.get("scoreDisplayMode") == "binary"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", help="an already running server (default: start one)")
    parser.add_argument("--pages", default=",".join(PAGES))
    parser.add_argument("--preset", choices=["mobile", "desktop"], default="mobile")
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--record", action="store_true", help="record the medians (record.py)")
    args = parser.parse_args()
    ensure_lighthouse()
    pages = args.pages.split(",")
    proc = None
    url = args.url
    if url is None:
        url, proc = start_server()
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in pages}
    load_before = os.getloadavg()[0]
    try:
        for _ in range(args.runs):
            for path in pages:  # pages alternate, so load drift hits each alike
                results[path].append(lighthouse(url + path, args.preset))
    finally:
        if proc is not None:
            stop_server(proc)

    print(f"\nLighthouse ({args.preset} preset), median of {args.runs} runs per page")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after\n"
    )
    header = (
        f"{'page':<9} {'perf':>5} {'a11y':>5} {'best':>5} {'SEO':>5} "
        f"{'FCP ms':>7} {'LCP ms':>7} {'TBT ms':>7} {'CLS':>6} {'SI ms':>7}  perf (all runs)"
    )
    print(header)
    print("-" * len(header))
    for path in pages:
        rows = results[path]

        def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
            return statistics.median(r[key] for r in rows)

        print(
            f"{path:<9} {med('performance'):>5.0f} {med('accessibility'):>5.0f} "
            f"{med('best-practices'):>5.0f} {med('seo'):>5.0f} {med('fcp_ms'):>7.0f} "
            f"{med('lcp_ms'):>7.0f} {med('tbt_ms'):>7.0f} {med('cls'):>6.3f} {med('si_ms'):>7.0f}"
            f"  {[r['performance'] for r in rows]}"
        )
        failed = sorted({a for r in rows for a in r["failed"]})
        if failed:
            print(f"{'':<9} failed audits: {', '.join(failed)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.record:
        record_medians(results, args, load_before)


def record_medians(
    results: dict[str, list[dict[str, Any]]], args: argparse.Namespace, load: float
) -> None:
    """One figure: each page's median performance score, with its TBT and LCP."""
    from bench.record import machine, record

    pages = list(results)

    def med(path: str, key: str) -> float:
        return statistics.median(r[key] for r in results[path])

    value = " / ".join(f"{med(p, 'performance'):.0f}" for p in pages)
    note = "; ".join(
        f"{p}: TBT {med(p, 'tbt_ms'):.0f} ms, LCP {med(p, 'lcp_ms'):.0f} ms, runs "
        f"{[r['performance'] for r in results[p]]}"
        for p in pages
    )
    command = f".venv/bin/python bench/bench_lighthouse.py --runs {args.runs} --pages {args.pages}"
    if args.preset != "mobile":
        command += f" --preset {args.preset}"
    row = {
        "figure": f"Lighthouse performance, {args.preset}, median of {args.runs}: "
        + " ".join(pages),
        "value": value,
        "unit": "score",
        "goal": ">= 98",
        "note": note,
        "machine": machine(f"load average {load:.1f} before"),
        "command": command + " --record",
    }
    doc = __doc__ or ""
    run = (
        ".venv/bin/python bench/bench_lighthouse.py [--runs 3] [--pages /model] [--record]"
        " (needs node/npm; installs into bench/lighthouse/)"
    )
    record("bench/bench_lighthouse.py", doc.splitlines()[0], run, [row])


if __name__ == "__main__":
    main()
