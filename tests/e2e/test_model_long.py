"""/model for a long text and many heads: a pooled overview grid (the requests carry
``pool``), one head at full resolution on canvas, a region at full resolution equal
to the API's cells, keyboard navigation, the layer filter, the log scale and the sink
column apart, the JS heap; 390 px.

A server of its own (module scope) lists one random GPT-2 with 4 layers × 32 heads
(128 maps) and room for the server's 512 tokens.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, Request, expect

from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2

pytestmark = [pytest.mark.e2e, pytest.mark.model]

NAME = "long-gpt2"
LAYERS, HEADS = 4, 32
GRID_POOL = 48  # static/js/model-overview.js: more than 100 maps -> 48 cells a side
UINT8_ERROR = 1 / 510
TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 27)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("long-models")
    make_gpt2(
        root / NAME,
        n_positions=600,
        n_embd=64,
        n_layer=LAYERS,
        n_head=HEADS,
        seed=11,
        initializer_range=0.05,
    )
    return root


@pytest.fixture(scope="module")
def server_url(models_dir: Path) -> Iterator[str]:
    """Overrides the session server for this module: one that lists the long model."""
    with models_server(models_dir) as url:
        yield url


@pytest.fixture(scope="module")
def tokens(server_url: str) -> int:
    answer = api(
        server_url,
        "/api/model/attention",
        {"model": NAME, "text": TEXT, "layers": [1], "heads": [1], "pool": 8},
    )
    T = len(answer["tokens"])
    assert 400 <= T <= 512, T  # as long as the server allows (ATTENTION_VIZ_MODEL_MAX_TOKENS 512)
    return T


# The grid's first request is streamed (its progress), the others are plain.
ATTENTION_URLS = ("/api/model/attention", "/api/model/attention/stream")


def attention_bodies(requests: list[Request]) -> list[dict[str, Any]]:
    return [json.loads(r.post_data or "{}") for r in requests if r.url.endswith(ATTENTION_URLS)]


def open_long(page: Page, T: int, **params: str) -> list[Request]:
    """Open /model on the long text; the attention requests the page sent."""
    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" else None)
    extra = "".join(f"&{k}={quote(v)}" for k, v in params.items())
    page.goto(f"/model?model={NAME}&text={quote(TEXT)}{extra}")
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", str(LAYERS * (HEADS + 2)), timeout=WAIT)
    expect(grid).to_have_attribute("data-tokens", str(T), timeout=WAIT)
    return sent


def zoom_ready(page: Page, key: str, rows: tuple[int, int], cols: tuple[int, int]) -> None:
    expect(page.get_by_test_id("canvas-zoom")).to_have_attribute(
        "data-ready", f"{key}:{rows[0]},{rows[1]}:{cols[0]},{cols[1]}", timeout=WAIT
    )


THUMB_PIXELS = """id => {
  const b = document.querySelector(`[data-testid='${id}']`);
  const atlas = b.closest('.head-grid').querySelector('.grid-atlas');
  const r = atlas.width / atlas.getBoundingClientRect().width;
  const x = Math.round((b.offsetLeft + b.clientLeft) * r);
  const y = Math.round((b.offsetTop + b.clientTop) * r);
  const [w, h] = [b.clientWidth, b.clientHeight].map(v => Math.round(v * r));
  return Array.from(atlas.getContext('2d').getImageData(x, y, w, h).data);
}"""


def thumb_pixels(page: Page, testid: str) -> list[int]:
    """RGBA of a thumbnail as drawn: its button's square of the grid's atlas canvas."""
    pixels: list[int] = page.evaluate(THUMB_PIXELS, testid)
    return pixels


def readout_at(page: Page, i: int, j: int, rows: int, cols: int) -> str:
    """Hover the centre of cell (i, j) of the canvas map; the readout's text."""
    box = page.get_by_test_id("zoom-canvas").bounding_box()
    assert box is not None
    page.mouse.move(
        box["x"] + (j + 0.5) * box["width"] / cols, box["y"] + (i + 0.5) * box["height"] / rows
    )
    return page.get_by_test_id("zoom-readout").text_content() or ""


def test_overview_is_pooled_and_a_head_opens_at_full_resolution(page: Page, tokens: int) -> None:
    sent = open_long(page, tokens)
    bodies = attention_bodies(sent)
    grid_bodies = [b for b in bodies if "heads" not in b]
    # Layer 1, then every other layer in one request (pooled maps are small; one forward).
    assert [b["layers"] for b in grid_bodies] == [[1], list(range(2, LAYERS + 1))]
    assert all(b["pool"] == GRID_POOL for b in grid_bodies), grid_bodies
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-overview", "true")
    # 128 maps: their thumbnails on one atlas canvas under the buttons, each drawn there:
    # a decoder's masked triangle grey (#d0d7de) and its weights in Viridis colours.
    assert page.locator("[data-testid='head-grid'] canvas").count() == 1
    for testid in ("map-L1-H1", "map-L3-H17", "map-L4-mean"):
        pixels = thumb_pixels(page, testid)
        colours = set(zip(pixels[0::4], pixels[1::4], pixels[2::4], strict=True))
        assert (208, 215, 222) in colours and len(colours) >= 3, (testid, colours)
    expect(page.get_by_test_id("overview-note")).to_contain_text(f"{tokens} tokens")
    # The large map: layer 1, head 1, fetched whole at full resolution, drawn on canvas.
    zoom_ready(page, "1-1", (0, tokens), (0, tokens))
    canvas = page.get_by_test_id("zoom-canvas")
    assert canvas.evaluate("c => [c.width, c.height]") == [tokens, tokens]
    expect(page.get_by_test_id("zoom-plot")).to_be_hidden()
    head_bodies = [b for b in attention_bodies(sent) if "heads" in b]
    assert head_bodies[0]["layers"] == [1] and head_bodies[0]["heads"] == [1]
    assert "pool" not in head_bodies[0] and "rows" not in head_bodies[0]
    # A thumbnail opens its head.
    page.get_by_test_id("map-L3-H17").click()
    zoom_ready(page, "3-17", (0, tokens), (0, tokens))
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 3, head 17")
    assert any(b.get("layers") == [3] and b.get("heads") == [17] for b in attention_bodies(sent))
    # The token view from pooled maps: a token's row in every head, asked for (every
    # layer, rows [i, i + 1], the keys it can read), in the head view and the strip.
    page.get_by_test_id("wp-token").nth(300).click()
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-token", "300", timeout=WAIT)
    rows = [b for b in attention_bodies(sent) if "rows" in b and "heads" not in b]
    assert [(b["layers"], b["rows"], b["cols"]) for b in rows] == [
        (list(range(1, LAYERS + 1)), [300, 301], [0, 301])
    ]
    expect(page.get_by_test_id("tv-layer-title")).to_have_text(
        "Every head of layer 3: the 24 tokens it reads most, of 301"
    )
    expect(page.get_by_test_id("tv-strip-canvas")).to_be_visible()
    assert page.get_by_test_id("tv-strip-map").evaluate("c => [c.width, c.height]") == [
        301,
        LAYERS * HEADS,
    ]


def test_a_region_at_full_resolution_equals_the_api(
    page: Page, tokens: int, server_url: str
) -> None:
    open_long(page, tokens, layer="2", head="5")
    zoom_ready(page, "2-5", (0, tokens), (0, tokens))
    rows, cols = (300, 340), (0, 40)
    page.get_by_test_id("zoom-row0").fill(str(rows[0]))
    page.get_by_test_id("zoom-row1").fill(str(rows[1]))
    page.get_by_test_id("zoom-col0").fill(str(cols[0]))
    page.get_by_test_id("zoom-col1").fill(str(cols[1]))
    page.get_by_test_id("zoom-apply").click()
    zoom_ready(page, "2-5", rows, cols)
    assert page.get_by_test_id("zoom-canvas").evaluate("c => [c.width, c.height]") == [40, 40]
    expected = api(
        server_url,
        "/api/model/attention",
        {
            "model": NAME,
            "text": TEXT,
            "layers": [2],
            "heads": [5],
            "rows": list(rows),
            "cols": list(cols),
        },
    )
    cells = expected["attentions"][0][0]
    assert expected["region"] == {"rows": list(rows), "cols": list(cols)}
    for i, j in [(0, 0), (5, 3), (17, 39), (39, 20), (39, 0), (22, 11)]:
        text = readout_at(page, i, j, 40, 40)
        found = re.search(r"\(row (\d+)\) → .* \(column (\d+)\): ([0-9.]+)$", text)
        assert found, text
        assert (int(found[1]), int(found[2])) == (rows[0] + i, cols[0] + j)
        assert abs(float(found[3]) - cells[i][j]) <= UINT8_ERROR + 5e-5, (i, j, text, cells[i][j])
    # A drag across the map asks for that region.
    page.get_by_test_id("zoom-whole").click()
    zoom_ready(page, "2-5", (0, tokens), (0, tokens))
    box = page.get_by_test_id("zoom-canvas").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.6)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.7, steps=4)
    page.mouse.up()
    expect(page.get_by_test_id("canvas-zoom")).not_to_have_attribute(
        "data-ready", re.compile(f":0,{tokens}:0,{tokens}$|^$"), timeout=WAIT
    )
    shown = page.get_by_test_id("zoom-canvas").evaluate("c => [c.dataset.rows, c.dataset.cols]")
    r0, r1 = map(int, shown[0].split(","))
    c0, c1 = map(int, shown[1].split(","))
    assert abs(r0 - 0.6 * tokens) <= 2 and abs(r1 - 0.7 * tokens) <= 2, shown
    assert abs(c0 - 0.5 * tokens) <= 2 and abs(c1 - 0.6 * tokens) <= 2, shown


def test_keyboard_and_layer_filter(page: Page, tokens: int) -> None:
    open_long(page, tokens)
    first = page.get_by_test_id("map-L1-H1")
    first.focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_test_id("map-L1-H2")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_test_id("map-L2-H2")).to_be_focused()
    expect(page.get_by_test_id("map-L2-H2")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Enter")
    zoom_ready(page, "2-2", (0, tokens), (0, tokens))
    # Layers 2 and 4 only: layer 1's and 3's rows are hidden, and ArrowDown skips layer 3.
    page.get_by_test_id("layer-filter").fill("2, 4")
    expect(page.get_by_test_id("map-L1-H2")).to_be_hidden()
    expect(page.get_by_test_id("map-L3-H2")).to_be_hidden()
    expect(page.get_by_test_id("layer-filter-note")).to_have_text("2 of 4 layers shown")
    page.get_by_test_id("map-L2-H2").focus()
    page.keyboard.press("ArrowDown")
    expect(page.get_by_test_id("map-L4-H2")).to_be_focused()
    # A filter that hides the open map opens the first shown one.
    page.get_by_test_id("layer-filter").fill("3")
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 3, head 1")
    page.get_by_test_id("layer-filter").fill("9")
    expect(page.get_by_test_id("layer-filter-note")).to_contain_text("layers 1 to 4")
    expect(page.get_by_test_id("layer-filter")).to_have_attribute("aria-invalid", "true")
    page.get_by_test_id("layer-filter").fill("")
    expect(page.get_by_test_id("map-L1-H2")).to_be_visible()


def zoom_pixels(page: Page) -> list[int]:
    pixels: list[int] = page.get_by_test_id("zoom-canvas").evaluate(
        "c => Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)"
    )
    return pixels


def test_log_scale_and_sink_apart_redraw(page: Page, tokens: int, server_url: str) -> None:
    # The head of layer 2 whose first column holds its largest weight by the widest margin.
    maps = api(
        server_url,
        "/api/model/attention",
        {"model": NAME, "text": TEXT, "layers": [2], "heads": [1, 2, 3, 4]},
    )
    ratios = []
    for h, cells in enumerate(maps["attentions"][0], start=1):
        rest = max(max(row[1:]) for row in cells)
        ratios.append((rest / max(max(row) for row in cells), h))
    ratio, head = min(ratios)
    assert ratio < 0.95, ratios  # row 0 reads only token 0 (weight 1): column 0 holds the maximum
    open_long(page, tokens, layer="2", head=str(head))
    zoom_ready(page, f"2-{head}", (0, tokens), (0, tokens))
    linear, linear_zoom = thumb_pixels(page, f"map-L2-H{head}"), zoom_pixels(page)
    page.get_by_test_id("colour-scale").select_option("log")
    assert "scale=log" in page.url
    expect(page.get_by_test_id("zoom-note")).to_contain_text("log colour scale")
    logged, logged_zoom = thumb_pixels(page, f"map-L2-H{head}"), zoom_pixels(page)
    assert logged != linear and logged_zoom != linear_zoom
    page.get_by_test_id("colour-scale").select_option("map")
    page.get_by_test_id("sink-apart").check()
    assert "sink=apart" in page.url
    # The colour range's top is now the largest weight outside column 0: the rest brightens.
    assert zoom_pixels(page) != linear_zoom
    page.get_by_test_id("sink-apart").uncheck()
    assert thumb_pixels(page, f"map-L2-H{head}") == linear
    assert zoom_pixels(page) == linear_zoom


def watch_errors(page: Page) -> list[str]:
    """The page's console errors and page errors, as they come."""
    errors: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def test_js_heap_and_screenshots(browser: Browser, server_url: str, tokens: int) -> None:
    sizes = {}
    for width in (1440, 390):
        context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server_url)
        page = context.new_page()
        errors = watch_errors(page)
        open_long(page, tokens)
        zoom_ready(page, "1-1", (0, tokens), (0, tokens))
        cdp = context.new_cdp_session(page)
        cdp.send("HeapProfiler.collectGarbage")
        heap = cdp.send("Runtime.getHeapUsage")
        sizes[width] = heap["usedSize"]
        wide = page.evaluate(
            "w => [...document.querySelectorAll('body *')]"
            ".filter(e => e.getBoundingClientRect().right > w + 1"
            " && !e.closest('.grid-card .head-grid'))"
            ".slice(0, 5).map(e => e.className || e.tagName)",
            width,
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= width, wide
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"model-long-{width}.png"), full_page=True)
        context.close()
        assert not errors, errors
    print(
        f"JS heap used after the overview and one head "
        f"(T = {tokens}, {LAYERS * HEADS} maps): {sizes}",
        file=sys.stderr,
    )
    assert max(sizes.values()) < 64 * 2**20, sizes
