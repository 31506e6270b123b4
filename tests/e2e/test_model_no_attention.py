"""/model with a model that has no attention layers (a bigram: 0 layers): the page says why
there are no maps, offers generation only, and still writes; at 1440 and 390 px."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api
from tests.e2e.servers import models_server
from tests.models.checkpoints import make_gpt2

pytestmark = [pytest.mark.e2e, pytest.mark.model]

PROMPT = "The dog ran"
NOTE = (
    "tiny-bigram has no attention layers (0 layers, as a trained bigram: no token reads "
    "another), so there is no attention to show. It still writes text after a prompt."
)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server of its own listing MiniLM and a GPT-2 without layers, as a bigram run is."""
    root: Path = tmp_path_factory.mktemp("no-attention")
    make_gpt2(root / "tiny-bigram", n_layer=0, n_head=1, tie_word_embeddings=False)
    with models_server(root) as url:
        yield url


def generate(page: Page, max_new: int) -> None:
    page.get_by_test_id("gen-prompt").fill(PROMPT)
    page.get_by_test_id("gen-max").fill(str(max_new))
    page.get_by_test_id("model-run").click()
    expect(page.get_by_test_id("model-status")).to_contain_text(
        f"{max_new} written, no attention layers", timeout=WAIT
    )


def test_the_page_says_there_is_no_attention_and_still_generates(
    page: Page, server_url: str
) -> None:
    page.goto(f"/model?model=tiny-bigram&prompt={quote(PROMPT)}")
    expect(page.get_by_test_id("no-attention")).to_have_text(NOTE)
    expect(page.get_by_test_id("model-layout")).to_be_hidden()
    expect(page.get_by_test_id("token-view")).to_be_hidden()
    expect(page.get_by_test_id("tokens-help")).to_be_hidden()
    expect(page.get_by_test_id("task-generate")).to_be_checked()
    expect(page.get_by_test_id("task-read")).to_be_disabled()
    generate(page, 5)
    expect(page.get_by_test_id("gen-summary")).to_be_visible()
    expected = api(  # greedy: the page wrote the same
        server_url,
        "/api/model/generate",
        {"model": "tiny-bigram", "prompt": PROMPT, "max_new_tokens": 5},
    )
    assert expected["layers"] == [] and len(expected["generated_ids"]) == 5
    expect(page.get_by_test_id("wp-token")).to_have_count(len(expected["tokens"]))
    # Another model: its maps are back.
    page.get_by_test_id("model-pick").select_option("sentence-transformers/all-MiniLM-L6-v2")
    expect(page.get_by_test_id("no-attention")).to_be_hidden()
    expect(page.get_by_test_id("model-layout")).to_be_visible()
    expect(page.get_by_test_id("tokens-help")).to_be_visible()
    expect(page.get_by_test_id("task-read")).to_be_enabled()
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", str(6 * (12 + 2)), timeout=WAIT
    )


def test_it_fits_390_px(browser: Browser, server_url: str) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, base_url=server_url, device_scale_factor=2
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"/model?model=tiny-bigram&prompt={quote(PROMPT)}")
    expect(page.get_by_test_id("no-attention")).to_be_visible()
    generate(page, 4)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()
    assert not errors, errors
