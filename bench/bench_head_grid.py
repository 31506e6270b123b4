"""/model's head grid with hundreds of heads: the time to draw every thumbnail, to draw
them again (a colour scale change) and to lay them out again (the layer filter), one
canvas per button (as the page drew them before) vs one atlas canvas (model-grid.js),
side by side in one headless Chromium.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_head_grid.py [--rounds 7] [--side 48]

Synthetic pooled maps (random causal rows, each thumbnail side × side cells, 48 as the
page asks for past 100 maps) for a Llama-3.2-1B-shaped grid (16 layers × 32 heads), a
Qwen2.5-0.5B-shaped one (24 × 14) and 32 × 32 heads, each with its mean and rollout
columns.  A time runs from the first call to the second animation frame after it (the
frame painted).  Both ways alternate within each round (so drift in the machine's load
hits both alike); medians are reported with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from playwright.sync_api import sync_playwright

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS
from devtools.server import start_server, stop_server

SHAPES = [(16, 32, "Llama-3.2-1B"), (24, 14, "Qwen2.5-0.5B"), (32, 32, "1,024 heads")]

# One measurement in the page (an arrow function Playwright evaluates).
MEASURE = (Path(__file__).parent / "head_grid_measure.js").read_text()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--side", type=int, default=48)
    args = parser.parse_args()
    before = os.getloadavg()
    url, process = start_server({"ATTENTION_VIZ_HF_CACHE": "0"})
    results: dict[tuple[int, int, bool], list[dict[str, float]]] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900}, base_url=url)
            page.goto("/model")
            page.get_by_test_id("head-grid").wait_for()
            page.wait_for_function(
                "document.querySelector('[data-testid=head-grid]').dataset.drawn > 0"
            )
            for _ in range(args.rounds):
                for L, H, _name in SHAPES:
                    for atlas in (False, True):
                        times = page.evaluate(
                            MEASURE, {"L": L, "H": H, "side": args.side, "atlas": atlas}
                        )
                        results.setdefault((L, H, atlas), []).append(times)
            browser.close()
    finally:
        stop_server(process)
    after = os.getloadavg()
    print(f"thumbnails {args.side} x {args.side} cells, {args.rounds} rounds, medians (ms)")
    print(f"{'grid':<36} {'way':<22} {'first draw':>10} {'redraw':>8} {'filter':>8} canvases")
    for L, H, name in SHAPES:
        row = {}
        for atlas in (False, True):
            runs = results[(L, H, atlas)]
            row[atlas] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            way = "one atlas canvas" if atlas else "a canvas per button"
            t = row[atlas]
            print(
                f"{f'{L} x {H} = {L * H} heads ({name})':<36} {way:<22} "
                f"{t['first']:>10.1f} {t['redraw']:>8.1f} {t['filter']:>8.1f} {t['canvases']:>8.0f}"
            )
        ratio = {k: row[True][k] / row[False][k] for k in ("first", "redraw", "filter")}
        print(
            f"{'':<36} {'atlas / per button':<22} {ratio['first']:>10.2f} "
            f"{ratio['redraw']:>8.2f} {ratio['filter']:>8.2f}"
        )
    print(f"load average {before[0]:.2f} -> {after[0]:.2f}")


if __name__ == "__main__":
    main()
