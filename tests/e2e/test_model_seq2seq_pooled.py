"""/model's grid for an encoder-decoder's long source (a random Marian with 512
positions): the page asks the server for pooled maps as for any other model, and each
thumbnail is the server's pooled cells a pixel each (the pixels those cells paint), not
the whole map scaled down by CSS; a thumbnail still opens its head at full resolution.

A server of its own (module scope) lists the Marian through ``ATTENTION_VIZ_MODELS``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from playwright.sync_api import Browser, Request, expect

from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import marian
from tests.e2e.test_model_long import watch_errors

pytestmark = [pytest.mark.e2e, pytest.mark.model]

MODEL = "marian-512"
TEXT = " ".join(["The cat sat on the mat because it was tired."] * 12)  # 193 tokens
GRID_POOL = 128  # model-overview.js' pool for few maps (2 layers × 4 heads)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Overrides the session server for this module: one that lists the Marian."""
    yield from marian(tmp_path_factory, "seq2seq-pooled", MODEL, max_position_embeddings=512)


def pooled_map(server_url: str, layer: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The API's uint8 maps of ``layer`` pooled as the grid asks, as bytes (H, rows, cols)."""
    body = {
        "model": MODEL,
        "text": TEXT,
        "layers": [layer],
        "pool": GRID_POOL,
        "format": "compact",
        "dtype": "uint8",
    }
    answer = api(server_url, "/api/model/attention", body)
    tensor = answer["attentions"][0]
    raw = np.frombuffer(base64.b64decode(tensor["data"]), dtype=np.uint8)
    return raw.reshape(tensor["shape"]), answer


# The pixels colour.js paints for the API's cells (the same options the grid draws with).
PAINTED = """async ({ bytes, rows, cols, block, T }) => {
  const { drawCells } = await import('/static/js/colour.js');
  const canvas = document.createElement('canvas');
  const flat = Float32Array.from(bytes, (b) => b / 255);
  let zmax = 0;
  for (const v of flat) zmax = Math.max(zmax, v);
  drawCells(canvas, flat, { rows, cols, block, T, zmax, causal: false });
  return Array.from(canvas.getContext('2d').getImageData(0, 0, cols, rows).data);
}"""

SHOWN = """id => {
  const c = document.querySelector(`[data-testid='${id}'] canvas`);
  const pixels = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  return [c.width, c.height, Array.from(pixels)];
}"""


def test_an_encoder_decoders_thumbnails_are_the_servers_pooled_cells(
    browser: Browser, server_url: str
) -> None:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=server_url)
    page = context.new_page()
    errors = watch_errors(page)
    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" else None)
    page.goto(f"/model?model={MODEL}&text={quote(TEXT)}")
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", str(2 * (4 + 2)), timeout=WAIT)
    expect(grid).to_have_attribute("data-overview", "true")
    bodies = [
        json.loads(r.post_data or "{}")
        for r in sent
        if r.url.endswith(("/api/model/attention", "/api/model/attention/stream"))
    ]
    grid_bodies = [b for b in bodies if "heads" not in b and "rows" not in b]
    assert grid_bodies and all(b.get("pool") == GRID_POOL for b in grid_bodies), grid_bodies
    for layer, head in [(1, 1), (2, 3)]:
        cells, answer = pooled_map(server_url, layer)
        T = len(answer["tokens"])
        rows, cols = answer["pooled"]["shape"]
        assert T == 193 and (rows, cols) == (97, 97) and answer["pooled"]["block"] == [2, 2]
        width, height, shown = page.evaluate(SHOWN, f"map-L{layer}-H{head}")
        assert (width, height) == (cols, rows)  # a pixel a pooled cell, not T a side
        painted = page.evaluate(
            PAINTED,
            {
                "bytes": cells[head - 1].ravel().tolist(),
                "rows": rows,
                "cols": cols,
                "block": answer["pooled"]["block"],
                "T": T,
            },
        )
        assert shown == painted, (layer, head)
    expect(page.get_by_test_id("overview-note")).to_contain_text("193 tokens")
    # A thumbnail opens its head whole, at full resolution.
    page.get_by_test_id("map-L2-H3").click()
    expect(page.get_by_test_id("canvas-zoom")).to_have_attribute(
        "data-ready", "2-3:0,193:0,193", timeout=WAIT
    )
    assert page.get_by_test_id("zoom-canvas").evaluate("c => [c.width, c.height]") == [193, 193]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "model-seq2seq-pooled-1440.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    grid.scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(ARTIFACTS / "model-seq2seq-pooled-390.png"), full_page=True)
    context.close()
    assert not errors, errors
