"""/model's export: the large map as drawn (PNG, SVG) and the text's maps as .npz and JSON.
The PNG of a long text's canvas holds the canvas's pixels; the .npz and the JSON hold the
API's maps (float32), as numpy reads them."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api
from tests.e2e.test_model_page import words

pytestmark = pytest.mark.e2e

MODEL = "tiny-bank-gpt"
TEXT = "Kim rowed the boat, then went to the bank."


def download(page: Page, testid: str, tmp_path: Path) -> Path:
    with page.expect_download(timeout=WAIT) as info:
        page.get_by_test_id(testid).click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    return target


def open_short(page: Page) -> None:
    page.goto(f"/model?model={MODEL}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute("data-drawn", "12", timeout=WAIT)


def test_the_npz_and_the_json_hold_the_api_s_maps(
    page: Page, server_url: str, tmp_path: Path
) -> None:
    open_short(page)
    expected = api(server_url, "/api/model/attention", {"model": MODEL, "text": TEXT})
    saved = download(page, "export-npz", tmp_path)
    assert saved.name == "attention-tiny-bank-gpt-maps.npz"
    with np.load(saved) as maps:
        assert list(maps["tokens"]) == expected["tokens"]
        assert list(maps["layers"]) == expected["layers"] == [1, 2]
        for name in ("attentions", "head_average", "rollout"):
            want = np.array(expected[name], dtype=np.float32)
            assert maps[name].dtype == np.float32 and maps[name].shape == want.shape
            np.testing.assert_array_equal(maps[name], want)
        T = len(expected["tokens"])
        assert maps["attentions"].shape == (2, 4, T, T)
    as_json = json.loads(download(page, "export-json", tmp_path).read_text())
    assert as_json["attentions"] == expected["attentions"]
    assert as_json["tokens"] == expected["tokens"]
    expect(page.get_by_test_id("export-status")).to_contain_text("Saved 2 layers")


def test_a_short_text_s_map_saves_as_png_and_svg(page: Page, tmp_path: Path) -> None:
    open_short(page)
    png = download(page, "export-png", tmp_path)
    assert png.name == "attention-layer-1-head-1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = download(page, "export-svg", tmp_path).read_text()
    assert svg.lstrip().startswith("<svg") and "attended to (key)" in svg


@pytest.mark.model
def test_a_long_text_s_png_holds_the_canvas_s_pixels(page: Page, tmp_path: Path) -> None:
    page.goto(f"/model?text={quote(words(200))}")
    ready = page.get_by_test_id("canvas-zoom")
    expect(ready).to_have_attribute("data-ready", re.compile(r"^1-1:0,\d+:0,\d+$"), timeout=WAIT)
    png = download(page, "export-png", tmp_path).read_bytes()
    same = page.evaluate(
        """async (b64) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const image = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
            const canvas = document.querySelector("[data-testid='zoom-canvas']");
            if (image.width !== canvas.width || image.height !== canvas.height) return 'size';
            const copy = new OffscreenCanvas(image.width, image.height).getContext('2d');
            copy.drawImage(image, 0, 0);
            const a = copy.getImageData(0, 0, image.width, image.height).data;
            const b = canvas.getContext('2d').getImageData(0, 0, image.width, image.height).data;
            for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return `pixel ${i}`;
            return 'same';
        }""",
        base64.b64encode(png).decode(),
    )
    assert same == "same"
    svg = download(page, "export-svg", tmp_path).read_text()
    assert 'href="data:image/png;base64,' in svg and "attends (query)" in svg
