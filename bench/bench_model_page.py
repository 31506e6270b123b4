"""The real-model page's two speed goals, measured against a live uvicorn.

(a) All 6 layers of a 512-token text as compact uint8 over loopback: the page's
    own strategy (layer 1, then layers 2-6 in parallel), with and without gzip,
    cold (a new text: the forward pass is included) and warm (cached).  Goal
    <= 1 s; also bytes per weight on the wire (goal <= 2).
(b) Navigation to the 84-map grid drawn (``performance.mark("model-grid-drawn")``
    set by static/js/model.js) at 256 tokens in headless Chromium.  Goal <= 2 s.
    Also when the worker had every layer decoded and when plotly.min.js was
    parsed: the grid is drawn on the main thread, so it waits for both.

Run: ``.venv/bin/python bench/bench_model_page.py`` (needs the model extra and
Debian's chromium).  Medians of 5 (a) and 3 (b).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from math import gcd
from pathlib import Path
from urllib.parse import quote

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from devtools.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.server import start_server, stop_server  # noqa: E402

LAYERS, HEADS = 6, 12
WORDS = (
    "the river bank was muddy after the rain and the bank approved the loan for the farm "
    "so the farmer walked down to the water with his dog"
).split()


def text_of(tokens: int, salt: int = 0) -> str:
    """A text of exactly ``tokens`` WordPieces ([CLS] and [SEP] included).

    Every word is one WordPiece; ``salt`` (0..485) picks a different word order,
    so a new salt is a text the server has not cached.
    """
    steps = [k for k in range(1, len(WORDS)) if gcd(k, len(WORDS)) == 1]
    step, offset = steps[salt // len(WORDS) % len(steps)], salt % len(WORDS)
    return " ".join(WORDS[(i * step + offset) % len(WORDS)] for i in range(tokens - 2))


async def fetch_all_layers(url: str, text: str, encoding: str) -> tuple[float, int, int]:
    """The page's strategy: layer 1, then 2..6 in parallel. Returns (s, wire bytes, T)."""
    headers = {"accept-encoding": encoding}
    base = {"text": text, "format": "compact", "dtype": "uint8"}
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=headers) as client:
        await client.get("/healthz")  # open the connection outside the timing
        start = time.perf_counter()
        first = await client.post("/api/model/attention", json={**base, "layers": [1]})
        first.raise_for_status()
        rest = await asyncio.gather(
            *(
                client.post("/api/model/attention", json={**base, "layers": [n]})
                for n in range(2, LAYERS + 1)
            )
        )
        bodies = [first.json()] + [r.json() for r in rest]  # decoding JSON is part of delivery
        elapsed = time.perf_counter() - start
    wire = first.num_bytes_downloaded + sum(r.num_bytes_downloaded for r in rest)
    return elapsed, wire, len(bodies[0]["tokens"])


def bench_transport(url: str, tokens: int = 512, runs: int = 5) -> list[tuple[str, float, str]]:
    rows = []
    for encoding in ("gzip", "identity"):
        for mode in ("cold", "warm"):
            times, wire, T = [], 0, 0
            if mode == "warm":
                asyncio.run(fetch_all_layers(url, text_of(tokens), encoding))
            for run in range(runs):
                salt = (1 + run + (0 if encoding == "gzip" else 10)) if mode == "cold" else 0
                elapsed, wire, T = asyncio.run(
                    fetch_all_layers(url, text_of(tokens, salt), encoding)
                )
                times.append(elapsed)
            assert T == tokens, T
            head_weights = LAYERS * HEADS * T * T
            all_values = LAYERS * (HEADS + 2) * T * T  # + head average + rollout
            rows.append(
                (
                    f"(a) 6 layers compact T={T}, {encoding}, {mode}",
                    statistics.median(times),
                    f"{wire / 1e6:.2f} MB; {wire / head_weights:.3f} B/head weight, "
                    f"{wire / all_values:.3f} B/value (12 heads + mean + rollout)",
                )
            )
    return rows


MARKS = {
    "model-grid-drawn": "navigation -> 84-map grid drawn",
    "model-worker-done": "navigation -> all layers fetched + decoded (worker)",
}
# plotly.min.js now loads after the grid (for the large map), so it is not timed here.


def bench_page(url: str, tokens: int = 256, runs: int = 3) -> list[tuple[str, float, str]]:
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for mode in ("cold", "warm"):
                times: dict[str, list[float]] = {name: [] for name in MARKS}
                for run in range(runs):
                    text = text_of(tokens, 30 + run if mode == "cold" else 0)
                    context = browser.new_context(viewport={"width": 1280, "height": 900})
                    page = context.new_page()
                    page.goto(f"{url}/model?text={quote(text)}")
                    page.wait_for_function(
                        "() => performance.getEntriesByName('model-grid-drawn').length > 0",
                        timeout=60_000,
                    )
                    marks = page.evaluate(
                        "names => Object.fromEntries(names.map(n =>"
                        " [n, (performance.getEntriesByName(n)[0] || {}).startTime]))",
                        list(MARKS),
                    )
                    drawn = page.get_attribute("[data-testid=head-grid]", "data-tokens")
                    assert drawn == str(tokens), drawn
                    for name in MARKS:
                        times[name].append(marks[name] / 1000)
                    context.close()
                for name, label in MARKS.items():
                    rows.append(
                        (
                            f"(b) {label}, T={tokens}, {mode}",
                            statistics.median(times[name]),
                            "runs: " + ", ".join(f"{t:.2f}" for t in times[name]) + " s",
                        )
                    )
        finally:
            browser.close()
    return rows


def main() -> None:
    url, process = start_server()
    try:
        with httpx.Client(base_url=url, timeout=120) as client:  # load the model first
            client.post("/api/model/attention", json={"text": "warm up", "format": "compact"})
        rows = bench_transport(url) + bench_page(url)
    finally:
        stop_server(process)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  median s  notes")
    for name, seconds, notes in rows:
        print(f"{name.ljust(width)}  {seconds:8.3f}  {notes}")


if __name__ == "__main__":
    main()
