"""The notebook's ``show()`` on a long text takes the server's long path: a random GPT-2
of 4,096 positions, a text of ~4,000 tokens.  Its view carries the server's pooled
answer byte for byte (``POST /api/model/attention`` with ``pool``), no tensor of a
layer's every-head map is made (a dispatch mode watches every op's output), and the
saved page draws its pooled maps in Chromium.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from app.notebook import show
from app.notebook.attentions import POOL_ABOVE
from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2
from tests.models.test_long_maps import LargestOutput
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

NAME = "tiny-gpt2-4k"
LAYERS, HEADS = 2, 4
WORDS = "the river bank was muddy and the money was in the bank by the water".split()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("long-show")
    return make_gpt2(root / NAME, n_positions=4096, n_layer=LAYERS, n_head=HEADS)


@pytest.fixture(scope="module")
def server(checkpoint: Path) -> Iterator[str]:
    with models_server(checkpoint.parent) as url:
        yield url


def long_text(checkpoint: Path, most: int = 4000) -> tuple[str, int]:
    """A text of at most ``most`` tokens (and over 3,500) for this tokenizer, and its count."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))

    def text_of(n: int) -> str:
        return " ".join(WORDS[i % len(WORDS)] for i in range(n))

    low, high = 1, most  # words: at least one token each
    while low < high:  # the most words whose text is at most `most` tokens
        mid = (low + high + 1) // 2
        if len(tokenizer.encode(text_of(mid)).ids) <= most:
            low = mid
        else:
            high = mid - 1
    text = text_of(low)
    count = len(tokenizer.encode(text).ids)
    assert 3500 < count <= most
    return text, count


def layer_bytes(layers: list[dict[str, Any]]) -> bytes:
    return b"".join(base64.b64decode(layer["data"]) for layer in layers)


def test_show_takes_the_servers_long_path(
    checkpoint: Path, server: str, browser: Browser, tmp_path: Path
) -> None:
    text, T = long_text(checkpoint)
    with LargestOutput() as watched:
        view = show(str(checkpoint), text, html_action="return")
    assert view is not None
    # The old path stacked every layer's (H, T, T) maps: L × H × T² elements at once.
    assert watched.largest < HEADS * T * T, (watched.largest, HEADS * T * T)
    (section,) = view.payload["sections"]
    assert section["tokens_total"] == T
    block = -(-T // POOL_ABOVE)
    cells = -(-T // block)
    assert section["pooled"] == block
    assert section["maps"]["shape"] == [LAYERS, HEADS, cells, cells]

    body = {"model": NAME, "text": text, "pool": POOL_ABOVE, "format": "compact", "dtype": "uint8"}
    answer = api(server, "/api/model/attention", body)
    assert answer["maps_path"] == "long" and answer["pooled"]["block"] == [block, block]
    # The server's pooled cells, byte for byte.
    assert base64.b64decode(section["maps"]["data"]) == layer_bytes(answer["attentions"])
    assert base64.b64decode(section["mean"]["data"]) == layer_bytes(answer["head_average"])
    if answer["rollout"] is None:
        assert section["rollout"] is None
    else:
        assert base64.b64decode(section["rollout"]["data"]) == layer_bytes(answer["rollout"])

    saved = view.save(tmp_path / "show.html")
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(saved.resolve().as_uri())
    page.wait_for_function("document.body.dataset.drawn === '1'")
    note = page.get_by_test_id("pooled-note").text_content() or ""
    assert f"{T} tokens" in note and f"{block} × {block}" in note
    ARTIFACTS.mkdir(exist_ok=True)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(ARTIFACTS / f"notebook_long_show_{width}.png"))
    page.close()
    assert not errors, errors
