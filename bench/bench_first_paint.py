"""Time to the first heatmap and bytes on a cold first load, per page.

Starts its own uvicorn (or uses ``--url``), then for each page does N cold
loads, each in a fresh browser context (empty cache), and reads:

* first paint: ``performance.mark("first-heatmap")``, set by static/js/heatmap.js
  right after the first Plotly draw resolves, in ms since navigation start
  ("min"/"max" are over the runs);
* plotly ready: ``performance.mark("plotly-ready")``, when plotly.min.js has been
  evaluated; first paint minus this is the pages' own cost;
* bytes: Resource Timing ``transferSize`` (on the wire, after gzip, headers
  included) and ``decodedBodySize`` (after decompression), summed over the
  document and every resource and fetch of the load.

Usage: .venv/bin/python bench/bench_first_paint.py [--runs 5] [--url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.server import start_server, stop_server  # noqa: E402

PAGES = ["/", "/compare", "/lessons"]

MEASURE = """() => {
  const mark = performance.getEntriesByName("first-heatmap")[0];
  const ready = performance.getEntriesByName("plotly-ready")[0];
  const entries = [
    ...performance.getEntriesByType("navigation"),
    ...performance.getEntriesByType("resource"),
  ];
  const sum = (key) => entries.reduce((s, e) => s + (e[key] || 0), 0);
  const plotly = entries.find((e) => e.name.endsWith("/vendor/plotly.min.js"));
  return {
    firstPaint: mark ? mark.startTime : null,
    plotlyReady: ready ? ready.startTime : null,
    transfer: sum("transferSize"),
    decoded: sum("decodedBodySize"),
    requests: entries.length,
    plotlyTransfer: plotly ? plotly.transferSize : null,
    plotlyDecoded: plotly ? plotly.decodedBodySize : null,
  };
}"""


def kb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1024:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--url", help="an already running server (default: start one)")
    args = parser.parse_args()
    proc = None
    url = args.url
    if url is None:
        url, proc = start_server()
    try:
        rows = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            # One throwaway load so server-side first-request costs are not counted.
            warm = browser.new_context()
            warm.new_page().goto(url + "/")
            warm.close()
            for path in PAGES:
                results = []
                for _ in range(args.runs):
                    context = browser.new_context(viewport={"width": 1280, "height": 900})
                    page = context.new_page()
                    page.goto(url + path)
                    page.wait_for_function(
                        "() => performance.getEntriesByName('first-heatmap').length > 0",
                        timeout=60_000,
                    )
                    page.wait_for_selector("main[data-ready]", timeout=60_000)
                    results.append(page.evaluate(MEASURE))
                    context.close()
                paints = [r["firstPaint"] for r in results]
                readies = [r["plotlyReady"] for r in results]
                first = results[0]
                rows.append(
                    (
                        path,
                        statistics.median(paints),
                        statistics.median(readies),
                        min(paints),
                        max(paints),
                        first["requests"],
                        first["transfer"],
                        first["decoded"],
                        first["plotlyTransfer"],
                        first["plotlyDecoded"],
                    )
                )
            browser.close()
    finally:
        if proc is not None:
            stop_server(proc)

    print(f"\nCold first load, {args.runs} runs per page, fresh context each (Chromium headless)")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    header = (
        f"{'page':<10} {'first heatmap ms':>17} {'plotly ready ms':>16} {'min':>7} {'max':>7} "
        f"{'requests':>9} "
        f"{'wire KB':>9} {'raw KB':>9} {'plotly wire KB':>15} {'plotly raw KB':>14}"
    )
    print(header)
    print("-" * len(header))
    for path, med, ready, lo, hi, reqs, wire, raw, p_wire, p_raw in rows:
        print(
            f"{path:<10} {med:>17.0f} {ready:>16.0f} {lo:>7.0f} {hi:>7.0f} {reqs:>9} "
            f"{kb(wire):>9} {kb(raw):>9} {kb(p_wire):>15} {kb(p_raw):>14}"
        )


if __name__ == "__main__":
    main()
