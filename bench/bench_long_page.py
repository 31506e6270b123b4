"""/model with many heads and a long text: how long the pooled overview grid takes to
draw, the bytes per layer, the JS heap, and keyboard moves, in headless Chromium.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_long_page.py [--layers 16] [--heads 64]

A random GPT-2 (``tests/models/checkpoints.make_gpt2``, width 128) with layers × heads
maps and a ~250-token text on a server of its own.  The page is loaded twice: the
second load's forward pass is cached, so its time is the page's (requests, decoding,
drawing).  Reported with the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import expect, sync_playwright

from devtools.chromium import CHROMIUM, CHROMIUM_ARGS
from devtools.server import start_server, stop_server
from tests.models.checkpoints import make_gpt2

TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 14)
FIRST_TO_DRAWN = (
    "() => performance.getEntriesByName('model-grid-drawn')[0].startTime"
    " - performance.getEntriesByName('model-first-layer')[0].startTime"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--heads", type=int, default=64)
    args = parser.parse_args()
    L, H = args.layers, args.heads
    root = Path(tempfile.mkdtemp())
    make_gpt2(root / "wide", n_positions=300, n_embd=2 * H, n_layer=L, n_head=H, seed=1)
    before = os.getloadavg()[0]
    url, process = start_server({"ATTENTION_VIZ_MODELS": str(root), "ATTENTION_VIZ_HF_CACHE": "0"})
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=url)
            page = context.new_page()
            sizes: list[int] = []
            page.on(
                "response",
                lambda r: (
                    sizes.append(len(r.body())) if r.url.endswith("/api/model/attention") else None
                ),
            )
            grid = page.get_by_test_id("head-grid")
            for _ in range(2):
                sizes.clear()
                started = time.perf_counter()
                page.goto(f"/model?model=wide&text={quote(TEXT)}")
                expect(grid).to_have_attribute("data-drawn", str(L * (H + 2)), timeout=600_000)
                seconds = time.perf_counter() - started
            zoom = page.get_by_test_id("canvas-zoom")
            expect(zoom).to_have_attribute("data-ready", re.compile("^1-1:"), timeout=60_000)
            drawn_ms = page.evaluate(FIRST_TO_DRAWN)
            cdp = context.new_cdp_session(page)
            cdp.send("HeapProfiler.collectGarbage")
            heap = cdp.send("Runtime.getHeapUsage")["usedSize"]
            page.get_by_test_id("map-L1-H1").focus()
            started = time.perf_counter()
            for _ in range(20):
                page.keyboard.press("ArrowRight")
            expect(page.get_by_test_id("map-L1-H21")).to_be_focused()
            moves = time.perf_counter() - started
            browser.close()
    finally:
        stop_server(process)
    print(
        f"{L} layers x {H} heads = {L * H} maps, a ~250-token text: "
        f"page load to grid drawn (forward cached) {seconds:.2f} s; first layer to grid "
        f"drawn {drawn_ms:.0f} ms; the grid's answers {len(sizes)}, {sum(sizes):,} bytes "
        f"(uncompressed; the large map's included); V8 heap used {heap / 2**20:.1f} MiB; "
        f"20 arrow-key moves {moves:.2f} s; load average {before:.1f} -> {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
