"""A target the model wrote, step by step: the head's rows are the map's.

/model's Marian card writes a target (``/api/model/generate``); its text, tokenized
again, splits into other tokens (on this random Marian: 41 written positions, 42
when the text is read back).  The link to a head's steps carries the written ids
(``target_ids``), so the explorer's rows are the rows of the map clicked.  Bad ids are
a 422 naming ``target_ids``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS, api, plot_data
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.servers import marian
from tests.e2e.test_model_seq2seq import MODEL, SOURCE

pytestmark = [pytest.mark.e2e, pytest.mark.model]

WRITTEN = 40  # the card writes 40 tokens at most


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from marian(tmp_path_factory, "written-target")


def refusal(server_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The one error item of a POST to /api/model/head that must be a 422."""
    request = urllib.request.Request(
        f"{server_url}/api/model/head",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 422
    (detail,) = json.load(caught.value)["detail"]
    return dict(detail)


def test_a_written_targets_head_has_the_maps_rows(page: Page, server_url: str) -> None:
    written = api(
        server_url,
        "/api/model/generate",
        {"model": MODEL, "prompt": SOURCE, "max_new_tokens": WRITTEN},
    )
    rows = written["target_tokens"]
    read_again = api(
        server_url,
        "/api/model/attention",
        {"model": MODEL, "text": SOURCE, "target": written["generated_text"]},
    )
    assert len(read_again["target_tokens"]) != len(rows)  # the case this test is about

    page.goto(f"/model?model={MODEL}&text={quote(SOURCE)}")
    card = page.get_by_test_id("stacks-card")
    expect(card).to_have_attribute("data-ready", "true", timeout=WAIT)
    expect(page.get_by_test_id("s2s-target")).to_have_value(written["generated_text"])
    page.get_by_test_id("s2s-tab-cross").click()
    page.get_by_test_id("s2s-map-L2-H3").click()
    page.get_by_test_id("s2s-open-head").click()
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    asked = parse_qs(urlsplit(page.url).query)
    assert asked["target_ids"] == [",".join(map(str, written["generated_ids"]))]

    weights = plot_data(page, "plot-attn_weights")
    assert len(weights) == len(rows)
    # Row i is what the map clicked shows in its row i (the generation's own weights).
    clicked = written["cross_attentions"][1][2]
    for shown, expected in zip(weights, clicked, strict=True):
        assert shown == pytest.approx(expected, abs=1e-5)
    ARTIFACTS.mkdir(exist_ok=True)
    for width in (1440, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(ARTIFACTS / f"written_target_head_{width}.png"))


def test_target_ids_are_checked(server_url: str) -> None:
    base = {"model": MODEL, "text": SOURCE, "stack": "cross", "layer": 1, "head": 1}
    both = refusal(server_url, {**base, "target": "Die Katze", "target_ids": [5, 6]})
    assert both["loc"] == ["body", "target_ids"]
    beyond = refusal(server_url, {**base, "target_ids": [5, 10**6]})
    assert beyond["loc"] == ["body", "target_ids"] and "1000000" in beyond["msg"]
    negative = refusal(server_url, {**base, "target_ids": [-1]})
    assert negative["loc"] == ["body", "target_ids"]
    empty = refusal(server_url, {**base, "target_ids": []})
    assert empty["loc"] == ["body", "target_ids"]
    too_long = refusal(server_url, {**base, "target_ids": [5] * 600})
    assert too_long["loc"] == ["body", "target_ids"] and too_long["type"] == "limit_exceeded"
