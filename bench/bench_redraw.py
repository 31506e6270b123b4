"""Change → redrawn: how long after a control change every affected plot is redrawn.

Starts its own uvicorn (or uses ``--url``) and drives headless Chromium. For each
change below, in the page:

1. ``t0 = performance.now()``, then the change is made the way a person makes it
   (the control's value set and its ``input``/``change`` event dispatched, or a
   click), in the same task;
2. the page then requests, computes and draws; static/js/heatmap.js sets a
   ``performance.mark("plot-drawn")`` after each plot's draw has finished (the
   quick renderer's canvas/SVG is written, or ``Plotly.react``/``newPlot`` has
   resolved);
3. **redrawn** = the last ``plot-drawn`` mark after t0, once at least one has
   come and no new one for 500 ms, minus t0. A change that redraws nothing
   within 15 s fails the run.

Every change is timed twice: with every figure drawn by the quick renderer (the
mouse away from the plots, as after a page load or a click on a control), and
with the mouse kept over one plot, which Plotly then draws and updates with
``Plotly.react`` (the others stay quick). Medians over ``--rounds``.

Changes: explorer on "Four heads on one sentence": Heads 1 → 2 → 4 → 1, one
number of x edited, causal toggled; compare: sentence B edited (two sentences in
turn); lessons: the scale slider moved (its 120 ms debounce is part of the time),
the d_k slider moved.

Usage: .venv/bin/python bench/bench_redraw.py [--rounds 5] [--url http://127.0.0.1:8000]
       [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.server import start_server, stop_server  # noqa: E402

# Set a control's value and fire its event, after noting t0, all in one task.
CHANGE = """([selector, value, event]) => {
  const node = document.querySelector(selector);
  window.__t0 = performance.now();
  if (event === "click") { node.click(); return; }
  node.value = value;
  node.dispatchEvent(new Event(event, { bubbles: true }));
}"""

# Resolves when the page has been quiet for `quiet` ms: the last plot-drawn mark after t0.
REDRAWN = """async (quiet) => {
  const t0 = window.__t0;
  const marks = () => performance.getEntriesByName("plot-drawn").filter((m) => m.startTime > t0);
  let count = 0;
  let since = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 25));
    const n = marks().length;
    if (n !== count) { count = n; since = performance.now(); continue; }
    if (n > 0 && performance.now() - since >= quiet) break;
    if (performance.now() - t0 > 15000) break;
  }
  const list = marks();
  if (!list.length) return { ms: null, plots: 0 };
  return { ms: list[list.length - 1].startTime - t0, plots: list.length };
}"""

# The plot kept under the mouse in the "Plotly" runs: Plotly draws it, and updates it
# with Plotly.react on every change (a figure in use); the others stay quick.
HOVERED = {"/": "plot-attn_weights", "/compare": "plot-weights-a", "/lessons": "plot-sharpness"}

Step = tuple[str, str, str, str]  # (label, selector, value, event)


def explorer(page: Page, url: str) -> list[Step]:
    page.goto(url + "/?preset=multi-head")
    page.get_by_test_id("preset-multi-head").click()
    page.wait_for_selector("main[data-ready]")
    heads = "[data-testid='opt-heads']"
    cell = "[data-testid='grid-x'] input"
    return [
        ("heads 1→2", heads, "2", "change"),
        ("heads 2→4", heads, "4", "change"),
        ("heads 4→1", heads, "1", "change"),
        ("edit one number of x", cell, "0.123", "change"),
        ("edit it back", cell, "0.5", "change"),
        ("causal on", "[data-testid='opt-causal']", "", "click"),
        ("causal off", "[data-testid='opt-causal']", "", "click"),
    ]


def compare(page: Page, url: str) -> list[Step]:
    page.goto(url + "/compare")
    page.wait_for_selector("main[data-ready]")
    # Typing is not a change until the form is submitted: the 'submit' event does it.
    return [
        ("sentence B edited", "[data-testid='tokens-b']", "money bank loan mud", "input"),
        ("submitted", "[data-testid='compare-form']", "", "submit"),
        ("sentence B back", "[data-testid='tokens-b']", "money bank loan", "input"),
        ("submitted again", "[data-testid='compare-form']", "", "submit"),
    ]


def lessons(page: Page, url: str) -> list[Step]:
    page.goto(url + "/lessons")
    page.wait_for_selector("main[data-ready]")
    return [
        ("scale slider 4→8", "[data-testid='scale-slider']", "8", "input"),
        ("scale slider 8→4", "[data-testid='scale-slider']", "4", "input"),
        ("d_k slider 64→256", "[data-testid='dim-slider']", "8", "input"),
        ("d_k slider 256→64", "[data-testid='dim-slider']", "6", "input"),
    ]


PAGES: dict[str, Callable[[Page, str], list[Step]]] = {
    "/": explorer,
    "/compare": compare,
    "/lessons": lessons,
}


def run_steps(page: Page, steps: list[Step]) -> dict[str, float]:
    out: dict[str, float] = {}
    for label, selector, value, event in steps:
        if event == "submit":
            page.evaluate(
                "s => { window.__t0 = performance.now();"
                " document.querySelector(s).requestSubmit(); }",
                selector,
            )
        elif event == "input" and "tokens-b" in selector:
            page.fill(selector, value)  # typing only: not timed
            continue
        else:
            page.evaluate(CHANGE, [selector, value, event])
        result = page.evaluate(REDRAWN, 500)
        if result["ms"] is None:
            raise SystemExit(f"{label}: nothing was redrawn")
        out[label] = result["ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--url", help="an already running server (default: start one)")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    proc = None
    url = args.url
    if url is None:
        url, proc = start_server()
    # times[(path, tier, label)] = [ms, ...]
    times: dict[tuple[str, str, str], list[float]] = {}
    load_before = os.getloadavg()[0]
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            for _ in range(args.rounds):
                for path, setup in PAGES.items():
                    for tier in ("quick", "plotly"):
                        steps = setup(page, url)
                        if tier == "plotly":
                            plot = page.get_by_test_id(HOVERED[path])
                            plot.hover()
                            page.wait_for_function(
                                "id => document.querySelector(`[data-testid='${id}']`)"
                                ".dataset.renderer === 'plotly'",
                                arg=HOVERED[path],
                            )
                        else:
                            page.mouse.move(0, 0)
                        for label, ms in run_steps(page, steps).items():
                            times.setdefault((path, tier, label), []).append(ms)
            context.close()
            browser.close()
    finally:
        if proc is not None:
            stop_server(proc)

    print(f"\nChange → redrawn (ms), median of {args.rounds} rounds, Chromium headless 1440×900")
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after\n"
    )
    header = f"{'page':<9} {'change':<24} {'quick ms':>9} {'1 Plotly ms':>12} {'max (either)':>13}"
    print(header)
    print("-" * len(header))
    labels = list(dict.fromkeys((path, label) for path, _, label in times))
    per_page: dict[str, list[float]] = {}
    for path, label in labels:
        q = times[(path, "quick", label)]
        pl = times[(path, "plotly", label)]
        mq, mp = statistics.median(q), statistics.median(pl)
        per_page.setdefault(path, []).extend([mq, mp])
        print(f"{path:<9} {label:<24} {mq:>9.0f} {mp:>12.0f} {max(max(q), max(pl)):>13.0f}")
    print()
    for path, medians in per_page.items():
        print(f"{path:<9} worst median: {max(medians):.0f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"|".join(k): v for k, v in times.items()}, indent=1))


if __name__ == "__main__":
    main()
