"""/model with a checkpoint whose tokens are markup (``<img onerror>``, ``<script>``,
``"><svg onload>``, quotes, entities) in a directory whose name has ``<`` and quotes:
the model picker, the maps, the token view, the head scores, the ablation table and the
logit lens show every string as text, and nothing runs (``window.__xss`` stays unset, no
dialog opens, no element is made from a token).

A server of its own (module scope) lists only that checkpoint (and the built-ins).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.hostile_checkpoint import MARKUP, NAME, make_hostile_gpt2
from tests.e2e.servers import models_server

pytestmark = [pytest.mark.e2e, pytest.mark.model]

TEXT = " ".join([*MARKUP, "the", "cat"])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("hostile-models")
    make_hostile_gpt2(root / NAME)
    with models_server(root) as url:
        yield url


def nothing_ran(page: Page, dialogs: list[str]) -> None:
    assert page.evaluate("() => window.__xss") is None
    assert dialogs == []
    # No element was made from a token's markup.
    made = page.evaluate(
        "() => document.querySelectorAll('main img, main svg[onload], main script, "
        "main [onerror], main [onmouseover], main b').length"
    )
    assert made == 0
    # Plotly reads <b> in labels as bold: the pages escape it, so none is drawn.
    assert page.locator("main tspan[style*='bold']").count() == 0


def test_markup_tokens_and_model_name_show_as_text(page: Page) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"/model?model={quote(NAME)}&text={quote(TEXT)}")
    expect(page.get_by_test_id("head-grid")).to_have_attribute(
        "data-drawn", "8", timeout=WAIT
    )  # 2 × (2 heads, mean, rollout)
    expect(page.get_by_test_id("model-name")).to_have_text(NAME)
    assert page.get_by_test_id("model-pick").input_value() == NAME
    tokens = page.get_by_test_id("wp-token")
    expect(tokens).to_have_count(len(MARKUP) + 2, timeout=WAIT)
    for i, token in enumerate(MARKUP):
        expect(tokens.nth(i)).to_contain_text(token)
    nothing_ran(page, dialogs)

    page.get_by_test_id("scores-run").click()
    expect(page.get_by_test_id("heads-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    expect(page.get_by_test_id("score-row")).to_have_count(4)
    page.get_by_test_id("lens-run").click()
    expect(page.get_by_test_id("lens-row")).to_have_count(2, timeout=WAIT)
    lens_text = page.get_by_test_id("lens-card").inner_text()
    assert any(token.replace(" ", "␣") in lens_text for token in MARKUP), lens_text
    page.get_by_test_id("ablate-grid-L1-H1").click()
    page.get_by_test_id("ablate-run").click()
    expect(page.get_by_test_id("ablate-card")).to_have_attribute("data-drawn", "1", timeout=WAIT)
    ablate_text = page.get_by_test_id("ablate-card").inner_text()
    assert any(token in ablate_text for token in MARKUP), ablate_text
    nothing_ran(page, dialogs)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "model-hostile-text.png"), full_page=True)
