"""/model at T = 4,096 (a random 2-layer × 2-head GPT-2 with 4,096 positions) and a
512-head grid (16 × 32) on a short text, in a real Chromium: the pooled overview, one
head whole (pooled to 1,024 a side) and a region at full resolution equal to the API,
the token view of a late token from the rows the page asks for (kept per token), the
token list a page at a time, the heads by keyboard, head scores, ablation and the logit
lens of the whole text (equal to the API's), no console errors, the JS heap,
and screenshots at 1440 and 390 px (nothing wider than the window); a pooled cell is
grey only when every pair in its block is masked.

A server of its own (module scope) with ATTENTION_VIZ_MODEL_MAX_TOKENS=4096.
"""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.head_cards import ablate_one_head, scores_are_the_apis
from tests.e2e.servers import models_server
from tests.e2e.test_model_long import THUMB_PIXELS, attention_bodies, readout_at, watch_errors
from tests.models.checkpoints import make_gpt2

pytestmark = [pytest.mark.e2e, pytest.mark.model]

WAIT = 90_000  # ms: forward passes at 4,096 tokens on a loaded 2-core machine
LONG, WIDE = "gpt2-4k", "gpt2-512-heads"
T = 4096
SENTENCE = "the river bank was muddy and the money was in the bank"
TEXT = " ".join([SENTENCE] * 227) + " the" * 9  # 4,096 tokens for make_gpt2's tokenizer
SHORT = "The bank approved the loan because the river flooded the farm."
UINT8_ERROR = 1 / 510
HEAP_BOUND = 200 * 2**20


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Overrides the session server: one that lists both models and allows 4,096 tokens."""
    root = tmp_path_factory.mktemp("models-4k")
    make_gpt2(root / LONG, n_positions=T, n_embd=32, n_layer=2, n_head=2, seed=3)
    make_gpt2(root / WIDE, n_positions=64, n_embd=64, n_layer=16, n_head=32, seed=5)
    with models_server(root, ATTENTION_VIZ_MODEL_MAX_TOKENS=str(T)) as url:
        yield url


def new_page(browser: Browser, url: str, width: int) -> tuple[BrowserContext, Page, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=url)
    page = context.new_page()
    return context, page, watch_errors(page)


def open_model(page: Page, model: str, text: str, maps: int, extra: str = "") -> list[Any]:
    """Open /model on a text; the POST requests the page sends (from now on)."""
    sent: list[Any] = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" else None)
    page.goto(f"/model?model={model}&text={quote(text)}{extra}")
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", str(maps), timeout=WAIT)
    return sent


def zoom_ready(page: Page, key: str, rows: tuple[int, int], cols: tuple[int, int]) -> None:
    expect(page.get_by_test_id("canvas-zoom")).to_have_attribute(
        "data-ready", f"{key}:{rows[0]},{rows[1]}:{cols[0]},{cols[1]}", timeout=WAIT
    )


def no_wider_than(page: Page, width: int) -> None:
    """Nothing on the page reaches past the window, but inside a box that scrolls sideways
    (the head grid, the head scores)."""
    wide = page.evaluate(WIDER_THAN, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, wide
    assert not wide, wide


WIDER_THAN = """w => {
  const scrolls = (e) => {
    for (let a = e.parentElement; a; a = a.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  return [...document.querySelectorAll('body *')]
    .filter((e) => e.getBoundingClientRect().right > w + 1 && !scrolls(e))
    .slice(0, 5).map((e) => e.className || e.tagName);
}"""


def heap_used(context: BrowserContext, page: Page) -> dict[str, int]:
    """V8's heap after a full garbage collection (CDP), in bytes: the objects (usedSize)
    and the typed arrays' memory outside it (backingStorageSize: the decoded maps)."""
    cdp = context.new_cdp_session(page)
    cdp.send("HeapProfiler.collectGarbage")
    usage = cdp.send("Runtime.getHeapUsage")
    return {"used": usage["usedSize"], "arrays": usage.get("backingStorageSize", 0)}


def decoded(tensor: dict[str, Any]) -> np.ndarray:
    """A compact float16 tensor of the API as an array."""
    raw = np.frombuffer(base64.b64decode(tensor["data"]), dtype="<f2")
    return raw.astype(np.float64).reshape(tensor["shape"])


def choose(page: Page, number: int) -> None:
    """Type a token's number (1-based) in the token list's "Token" field."""
    page.get_by_test_id("token-go").fill(str(number))
    page.get_by_test_id("token-go").dispatch_event("change")
    expect(page.get_by_test_id("token-view")).to_have_attribute(
        "data-token", str(number - 1), timeout=WAIT
    )


def test_4096_tokens_overview_zoom_region_token_view(browser: Browser, server_url: str) -> None:
    context, page, errors = new_page(browser, server_url, 1440)
    sent = open_model(page, LONG, TEXT, 2 * (2 + 2), "&layer=2&head=2")
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-tokens", str(T))
    expect(grid).to_have_attribute("data-overview", "true")
    grid_bodies = [b for b in attention_bodies(sent) if "heads" not in b and "rows" not in b]
    assert {b["pool"] for b in grid_bodies} == {128}  # 4 maps: 128 cells a side, 32 × 32 blocks
    expect(page.get_by_test_id("overview-note")).to_contain_text("4096 tokens")
    # One head whole: pooled by the server to 1,024 a side (4 × 4 blocks), on canvas.
    zoom_ready(page, "2-2", (0, T), (0, T))
    zoom = page.get_by_test_id("zoom-canvas")
    assert zoom.evaluate("c => [c.width, c.height, c.dataset.block]") == [1024, 1024, "4,4"]
    head_bodies = [b for b in attention_bodies(sent) if "heads" in b]
    assert head_bodies[0]["pool"] == 1024 and head_bodies[0]["dtype"] == "float16"
    # The API's rows 4,000-4,095 over the first 4,090 keys, every head (float16): the
    # region and the token view below are checked against them.
    expected = api(
        server_url,
        "/api/model/attention",
        {
            "model": LONG,
            "text": TEXT,
            "rows": [4000, T],
            "cols": [0, 4090],
            "format": "compact",
            "dtype": "float16",
        },
    )
    maps = np.stack([decoded(t) for t in expected["attentions"]])  # (2, 2, 96, 4090)
    # A region at full resolution: rows 4,000-4,095 by columns 0-95.
    rows, cols = (4000, T), (0, 96)
    for name, value in zip(("row0", "row1", "col0", "col1"), (*rows, *cols), strict=True):
        page.get_by_test_id(f"zoom-{name}").fill(str(value))
    page.get_by_test_id("zoom-apply").click()
    zoom_ready(page, "2-2", rows, cols)
    assert zoom.evaluate("c => [c.width, c.height, c.dataset.block]") == [96, 96, "1,1"]
    for i, j in [(0, 0), (10, 3), (95, 95), (60, 1), (95, 0)]:
        text = readout_at(page, i, j, 96, 96)
        found = re.search(r"\(row (\d+)\) → .* \(column (\d+)\): ([0-9.]+)$", text)
        assert found and (int(found[1]), int(found[2])) == (rows[0] + i, cols[0] + j), text
        want = maps[1, 1, i, j]
        assert abs(float(found[3]) - want) <= UINT8_ERROR + 2**-11 * want + 5e-5, (i, j, text)

    # The token list: a page of 256 chips; token 4,090 typed in opens its page and view.
    expect(page.get_by_test_id("wp-token")).to_have_count(256)
    expect(page.get_by_test_id("token-page")).to_have_text("tokens 1–256 of 4,096")
    choose(page, 4090)
    expect(page.get_by_test_id("token-page")).to_have_text("tokens 3,841–4,096 of 4,096")
    pressed = page.locator("[data-testid=wp-token][aria-pressed=true]")
    expect(pressed).to_have_attribute("data-index", "4089")
    row_bodies = [b for b in attention_bodies(sent) if "rows" in b and "heads" not in b]
    assert len(row_bodies) == 1, row_bodies
    assert row_bodies[0]["rows"] == [4089, 4090] and row_bodies[0]["cols"] == [0, 4090]
    assert row_bodies[0]["layers"] == [1, 2] and row_bodies[0]["dtype"] == "float16"
    assert "pool" not in row_bodies[0]
    # The strip: 4 heads × 4,090 keys on canvas, each row the API's (both float16).
    expect(page.get_by_test_id("tv-strip-canvas")).to_be_visible()
    expect(page.get_by_test_id("tv-strip")).to_be_hidden()
    strip = page.get_by_test_id("tv-strip-map")
    assert strip.evaluate("c => [c.width, c.height]") == [4090, 4]
    shown = np.array(strip.evaluate("c => c._rows.map(r => Array.from(r))"))
    # (Two float16 roundings of one weight computed by two requests: within 2 steps.)
    assert np.allclose(shown, maps[:, :, 89, :].reshape(4, 4090), rtol=2**-10, atol=1e-7)
    # The head view: the 24 keys layer 2 reads most; head 1's strongest in its summary.
    expect(page.get_by_test_id("tv-layer-title")).to_have_text(
        "Every head of layer 2: the 24 tokens it reads most, of 4090"
    )
    strongest = int(np.argmax(maps[1, 0, 89]))
    expect(page.locator(".hv-summary")).to_contain_text(f"·{strongest} ")
    # A click on a row of the large map (the region) chooses that row's token; back to
    # token 4,090: its rows were kept, nothing is asked again.
    zoom.scroll_into_view_if_needed()
    box = zoom.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * (50.5 / 96))
    expect(page.get_by_test_id("token-view")).to_have_attribute("data-token", "4050", timeout=WAIT)
    asked = len(attention_bodies(sent))
    choose(page, 4090)
    assert len(attention_bodies(sent)) == asked
    assert np.array_equal(np.array(strip.evaluate("c => c._rows.map(r => Array.from(r))")), shown)

    heap = heap_used(context, page)
    print(
        f"JS heap at T = {T} after the overview, a head, a region and two tokens' rows: "
        f"{heap['used'] / 2**20:.1f} MiB of objects + {heap['arrays'] / 2**20:.1f} MiB of "
        f"typed arrays",
        file=sys.stderr,
    )
    assert heap["used"] + heap["arrays"] < HEAP_BOUND, heap
    # The log scale: the region's small weights (float16, under uint8's 1/255) coloured.
    linear = zoom.evaluate("c => new Set(c.getContext('2d').getImageData(0, 0, 96, 96).data).size")
    page.get_by_test_id("colour-scale").select_option("log")
    expect(page.get_by_test_id("zoom-note")).to_contain_text("log colour scale")
    logged = zoom.evaluate("c => new Set(c.getContext('2d').getImageData(0, 0, 96, 96).data).size")
    assert logged > linear, (linear, logged)
    analyses_at_4096(page, server_url)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "model-4k-1440.png"), full_page=True)
    # At 390 px: the same page, nothing wider than the window.
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_test_id("head-grid").scroll_into_view_if_needed()
    no_wider_than(page, 390)
    page.screenshot(path=str(ARTIFACTS / "model-4k-390.png"), full_page=True)
    context.close()
    assert not errors, errors


def analyses_at_4096(page: Page, server_url: str) -> None:
    """Head scores, ablation and the logit lens of the 4,096-token text, from the page
    (each equal to the API's answer for the same text), and attribution."""
    expect(page.get_by_test_id("overview-note")).not_to_contain_text("512")
    expect(page.get_by_test_id("head-analysis")).to_be_visible()
    page.get_by_test_id("scores-run").click()
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    body = {"model": LONG, "text": TEXT, "seed": 0}
    scores = scores_are_the_apis(page, server_url, body, [(1, 1), (2, 2)])
    assert len(scores["tokens"]) == T
    # One head ablated: the loss over 4,095 predictions, as the API gives it.
    body = {"model": LONG, "text": TEXT, "heads": [[2, 1]], "mode": "zero"}
    ablate_one_head(page, server_url, body, WAIT)
    expect(page.get_by_test_id("ablate-summary")).to_contain_text(f"of {T} next-token")
    # The logit lens: a row per layer, the last token's prediction the API's.
    page.get_by_test_id("lens-run").click()
    expect(page.get_by_test_id("lens-row")).to_have_count(2, timeout=WAIT)
    lens = api(server_url, "/api/model/logit-lens", {"model": LONG, "text": TEXT})
    assert len(lens["top_tokens"][1]) == T
    last = page.get_by_test_id("lens-row").last.locator("td").last
    assert last.inner_text() == lens["top_tokens"][1][-1][0].replace(" ", "␣")
    # Which heads matter (attribution patching): every head estimated at 4,096 tokens.
    page.get_by_test_id("attr-run").click()
    expect(page.get_by_test_id("attribution")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    expect(page.get_by_test_id("attr-estimate-L2-H1")).to_be_visible()
    for testid in ("scores-error", "ablate-error", "lens-error", "attr-error"):
        expect(page.get_by_test_id(testid)).to_be_empty()


def test_512_heads_on_one_atlas(browser: Browser, server_url: str) -> None:
    context, page, errors = new_page(browser, server_url, 1440)
    open_model(page, WIDE, SHORT, 16 * (32 + 2))
    grid = page.get_by_test_id("head-grid")
    # One canvas for 544 thumbnails; each drawn in its button's square.
    assert grid.locator("canvas").count() == 1
    for testid in ("map-L1-H1", "map-L16-H32", "map-L9-mean"):
        pixels = page.evaluate(THUMB_PIXELS, testid)
        colours = set(zip(pixels[0::4], pixels[1::4], pixels[2::4], strict=True))
        assert (208, 215, 222) in colours and len(colours) >= 3, (testid, len(colours))
    # By keyboard: arrows move the pressed head (named for a screen reader), Enter opens it.
    page.get_by_test_id("map-L1-H1").focus()
    for key in ["ArrowRight"] * 6 + ["ArrowDown"] * 2:
        page.keyboard.press(key)
    head = page.get_by_test_id("map-L3-H7")
    expect(head).to_be_focused()
    expect(head).to_have_attribute("aria-label", "Layer 3, head 7")
    expect(head).to_have_attribute("aria-pressed", "true")
    assert page.locator("[data-testid=head-grid] [aria-pressed=true]").count() == 1
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("zoom-title")).to_have_text("Layer 3, head 7")
    # Layers filtered: the atlas follows the buttons (layer 5's row moves up, unchanged).
    before = page.evaluate(THUMB_PIXELS, "map-L5-H1")
    top = page.get_by_test_id("map-L5-H1").bounding_box()
    page.get_by_test_id("layer-filter").fill("5-6")
    expect(page.get_by_test_id("map-L1-H1")).to_be_hidden()
    moved = page.get_by_test_id("map-L5-H1").bounding_box()
    assert top is not None and moved is not None and moved["y"] < top["y"]
    assert page.evaluate(THUMB_PIXELS, "map-L5-H1") == before
    page.get_by_test_id("layer-filter").fill("")
    expect(page.get_by_test_id("map-L1-H1")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "model-512-heads-1440.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    no_wider_than(page, 390)
    page.screenshot(path=str(ARTIFACTS / "model-512-heads-390.png"), full_page=True)
    context.close()
    assert not errors, errors


PAINT = """async ({ T, block, window }) => {
  const { paintCells } = await import('/static/js/colour.js');
  const { MASKED } = await import('/static/js/colour.js');
  const [rows, cols] = [Math.ceil(T / block), Math.ceil(T / block)];
  const pixels = new Uint32Array(rows * cols);
  const flat = new Float32Array(rows * cols).fill(0.5);
  const options = { rows, cols, block: [block, block], T, zmax: 1, causal: true };
  paintCells(pixels, cols, [0, 0], flat, { ...options, slidingWindow: window });
  const grey = (i) => Array.from({ length: cols }, (_, j) => pixels[i * cols + j] === MASKED);
  return Array.from({ length: rows }, (_, i) => grey(i));
}"""


def test_pooled_cells_are_grey_only_when_every_pair_is_masked(
    browser: Browser, server_url: str
) -> None:
    context, page, errors = new_page(browser, server_url, 800)
    page.goto("/docs")
    for T, block, window in [(10, 4, None), (300, 32, None), (50, 3, 7), (64, 8, 20)]:
        grey = page.evaluate(PAINT, {"T": T, "block": block, "window": window})
        side = -(-T // block)
        for i in range(side):
            for j in range(side):
                pairs = [
                    (q, k)
                    for q in range(i * block, min(T, (i + 1) * block))
                    for k in range(j * block, min(T, (j + 1) * block))
                ]
                every = all(k > q or (window is not None and q - k >= window) for q, k in pairs)
                assert grey[i][j] == every, (T, block, window, i, j)
    context.close()
    assert not errors, errors


def test_a_rollout_left_out_by_the_server(browser: Browser, server_url: str) -> None:
    """The server may answer `rollout: null` for a long text: the page says so."""
    context, page, errors = new_page(browser, server_url, 1280)

    def without_rollout(route: Any) -> None:
        response = route.fetch()
        answer = response.json()
        answer["rollout"] = None
        route.fulfill(response=response, json=answer)

    page.route("**/api/model/attention", without_rollout)
    open_model(page, WIDE, SHORT, 16 * (32 + 2))
    grid = page.get_by_test_id("head-grid")
    # (Layer 1 comes through the streamed request, left as it is; layers 2-16 without.)
    assert grid.locator(".map-btn.absent").count() >= 15
    expect(page.get_by_test_id("map-L4-rollout")).to_have_class(re.compile(r"\babsent\b"))
    assert grid.locator(".map-btn.pending").count() == 0
    expect(page.get_by_test_id("map-L4-rollout")).to_have_attribute(
        "title", "Rollout through layer 4: not computed for this text"
    )
    page.get_by_test_id("map-L4-rollout").click()
    expect(page.get_by_test_id("zoom-title")).to_have_text("Rollout through layer 4")
    expect(page.get_by_test_id("zoom-legend")).to_contain_text("did not compute the rollout")
    expect(page.get_by_test_id("zoom-plot")).to_be_hidden()
    page.get_by_test_id("map-L4-mean").click()
    expect(page.get_by_test_id("zoom-plot")).to_be_visible()
    context.close()
    assert not errors, errors
