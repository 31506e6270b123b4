"""Time to the first heatmap, cold and on a second visit, and bytes on the wire, per page.

Starts its own uvicorn (or uses ``--url``), then for each page, alternating
cold and warm runs so that drift in machine load hits both alike:

* **cold**: a fresh browser context (empty HTTP cache, no V8 code cache), one load;
* **warm**: a fresh context that loads the page once, then again: the second
  load is measured (HTTP cache and V8 code cache from the first; our own
  modules revalidate with 304s, Plotly and the fonts are cache hits).

Read per load, in ms since navigation start:

* **first heatmap**: ``performance.mark("first-heatmap")``, set by
  static/js/heatmap.js when the page's first figure has been drawn (by the quick
  canvas/SVG renderer; Plotly is not needed for it). On /model it is the large
  map beside the canvas grid;
* **bytes**: Resource Timing ``transferSize`` (on the wire after gzip, headers
  included; a cache hit is 0) and ``decodedBodySize``, summed over the document
  and every resource and fetch of the load, and the request count;
* **Plotly on reach** (``--plotly``, on by default): after the load, the mouse
  moves over the first plot, which loads Plotly and swaps the figures in place;
  reported: ms from the hover to ``first-plotly`` (the first Plotly figure drawn),
  and Plotly's bytes on the wire.

Usage: .venv/bin/python bench/bench_first_paint.py [--runs 5] [--url http://127.0.0.1:8000]
       [--pages /,/compare,/lessons,/model] [--no-plotly] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import Browser, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.server import start_server, stop_server  # noqa: E402

PAGES = ["/", "/compare", "/lessons", "/model"]
# The plot whose hover loads Plotly, per page.
FIRST_PLOT = {
    "/": "plot-x",
    "/compare": "plot-weights-a",
    "/lessons": "plot-variance",
    "/model": "zoom-plot",
}

MEASURE = """() => {
  const mark = (name) => {
    const e = performance.getEntriesByName(name)[0];
    return e ? e.startTime : null;
  };
  const entries = [
    ...performance.getEntriesByType("navigation"),
    ...performance.getEntriesByType("resource"),
  ];
  const sum = (list, key) => list.reduce((s, e) => s + (e[key] || 0), 0);
  const plotly = entries.filter((e) => /\\/vendor\\/plotly/.test(e.name));
  return {
    firstPaint: mark("first-heatmap"),
    transfer: sum(entries, "transferSize"),
    decoded: sum(entries, "decodedBodySize"),
    requests: entries.length,
    plotlyTransfer: plotly.length ? sum(plotly, "transferSize") : null,
  };
}"""

HOVER_TO_PLOTLY = """async (testid) => {
  const plot = document.querySelector(`[data-testid='${testid}']`);
  const start = performance.now();
  plot.dispatchEvent(new PointerEvent("pointerover", { bubbles: true }));
  await new Promise((resolve) => {
    const done = () => performance.getEntriesByName("first-plotly").length > 0;
    const check = () => (done() ? resolve() : setTimeout(check, 5));
    check();
  });
  const plotly = performance.getEntriesByType("resource")
    .filter((e) => /\\/vendor\\/plotly/.test(e.name));
  return {
    hoverToPlotly: performance.getEntriesByName("first-plotly")[0].startTime - start,
    plotlyTransfer: plotly.reduce((s, e) => s + (e.transferSize || 0), 0),
  };
}"""


def kb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1024:,.0f}"


def load(browser: Browser, url: str, path: str, warm: bool, plotly: bool) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        if warm:
            page.goto(url + path)
            page.wait_for_function(
                "() => performance.getEntriesByName('first-heatmap').length > 0", timeout=60_000
            )
            if plotly:  # the first visit used Plotly too: it is in the cache
                page.evaluate(HOVER_TO_PLOTLY, FIRST_PLOT[urlsplit(path).path])
            page.wait_for_timeout(300)  # let the code cache be written
        page.goto(url + path)
        page.wait_for_function(
            "() => performance.getEntriesByName('first-heatmap').length > 0", timeout=60_000
        )
        result = page.evaluate(MEASURE)
        if plotly:
            result.update(page.evaluate(HOVER_TO_PLOTLY, FIRST_PLOT[urlsplit(path).path]))
        return result
    finally:
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--url", help="an already running server (default: start one)")
    parser.add_argument("--pages", default=",".join(PAGES))
    parser.add_argument("--no-plotly", action="store_true", help="skip the hover that loads Plotly")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    pages = args.pages.split(",")
    plotly = not args.no_plotly
    proc = None
    url = args.url
    if url is None:
        url, proc = start_server()
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    load_before = os.getloadavg()[0]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            # One throwaway load per page so server-side first-request costs are not counted.
            for path in pages:
                load(browser, url, path, warm=False, plotly=False)
            for path in pages:
                raw[path] = {"cold": [], "warm": []}
                for _ in range(args.runs):
                    for kind in ("cold", "warm"):
                        raw[path][kind].append(load(browser, url, path, kind == "warm", plotly))
            browser.close()
    finally:
        if proc is not None:
            stop_server(proc)

    print(f"\nFirst heatmap, {args.runs} runs per page and kind (Chromium headless, 1280×900)")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after\n"
    )
    header = (
        f"{'page':<9} {'cold ms':>8} {'min-max':>10} {'warm ms':>8} {'min-max':>10} "
        f"{'cold KB':>8} {'warm KB':>8} {'req':>4} {'raw KB':>7}"
    )
    if plotly:
        header += f" {'hover→Plotly cold':>18} {'warm':>6} {'Plotly KB':>10}"
    print(header)
    print("-" * len(header))
    for path in pages:
        cold, warm = raw[path]["cold"], raw[path]["warm"]
        c = [r["firstPaint"] for r in cold]
        w = [r["firstPaint"] for r in warm]
        line = (
            f"{path:<9} {statistics.median(c):>8.0f} {min(c):>4.0f}-{max(c):<5.0f} "
            f"{statistics.median(w):>8.0f} {min(w):>4.0f}-{max(w):<5.0f} "
            f"{kb(statistics.median(r['transfer'] for r in cold)):>8} "
            f"{kb(statistics.median(r['transfer'] for r in warm)):>8} "
            f"{cold[0]['requests']:>4} {kb(cold[0]['decoded']):>7}"
        )
        if plotly:
            hc = statistics.median(r["hoverToPlotly"] for r in cold)
            hw = statistics.median(r["hoverToPlotly"] for r in warm)
            line += f" {hc:>18.0f} {hw:>6.0f} {kb(cold[0]['plotlyTransfer']):>10}"
        print(line)
    print(
        "\ncold/warm KB: bytes on the wire for the page load (before any hover); "
        "Plotly KB: on the wire when the hover loads it (cold)."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
