"""/model's progress bar and cancellation in a real browser: a maps request held at its
second layer (a forward hook in the server, ``tests/progress_hold.py``: slow until the
page lets go, never a sleep) shows the bar after a second with "layer 1 of 4"
(role="progressbar", aria-valuenow); asking for another text aborts the held request,
the server sees the cancel (the hold is released by it) and the new text's maps are
drawn; the bar is gone.  Screenshots at 1440 and 390 px while the bar shows.

The app is served from a thread of this process, so the test can hook its model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from devtools.server import serve_in_thread
from tests.e2e.conftest import ARTIFACTS, api
from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.models.checkpoints import make_gpt2
from tests.progress_hold import held
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

NAME = "progress-gpt2"
LAYERS, HEADS = 4, 2
FIRST = "The bank approved the loan."
SECOND = "The river bank was muddy and the fish were gone."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    require("transformers")
    from app.main import create_app
    from app.settings import Settings

    root: Path = tmp_path_factory.mktemp("progress-models")
    make_gpt2(root / NAME, n_layer=LAYERS, n_head=HEADS, n_positions=64)
    app = create_app(Settings(models=str(root), hf_cache=False))
    with serve_in_thread(app) as url:
        yield url, app


@pytest.fixture(scope="module")
def server_url(served: tuple[str, Any]) -> str:
    """Overrides the session server for this module (the ``page`` fixture's origin)."""
    return served[0]


def no_overflow(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


# The held request is aborted on purpose (conftest.SUPERSEDED lets that failed fetch pass).
def test_the_bar_shows_a_slow_request_and_a_newer_one_cancels_it(
    page: Page, served: tuple[str, Any]
) -> None:
    url, app = served
    api(url, f"/api/model?model={NAME}")  # the registry is built and the model loaded
    model = app.state.models.load(NAME)
    with held(model, layer=1) as seen:
        page.goto(f"/model?model={NAME}&text={quote(FIRST)}")
        bar = page.get_by_test_id("model-progress")
        expect(bar).to_be_visible(timeout=WAIT)
        expect(bar).to_have_attribute("role", "progressbar")
        expect(bar).to_have_attribute("aria-valuenow", "1")
        expect(bar).to_have_attribute("aria-valuemax", str(LAYERS))
        text = page.get_by_test_id("model-progress-text")
        # Held: the next layer is later than the first one's pace foretold, so no estimate.
        expect(text).to_have_text(f"Forward pass: layer 1 of {LAYERS}")
        expect(bar).to_have_attribute("aria-valuetext", text.inner_text())
        ARTIFACTS.mkdir(exist_ok=True)
        for width in (1440, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.screenshot(path=str(ARTIFACTS / f"model-progress-{width}.png"))
            assert no_overflow(page), f"wider than the window at {width} px"
        assert (seen["held"], seen["cancelled"], seen["last_block"]) == (1, 0, 0)

        # A newer text: the page aborts the held request; the server cancels its pass.
        page.get_by_test_id("model-text").fill(SECOND)
        page.get_by_test_id("model-run").click()
        grid = page.get_by_test_id("head-grid")
        expect(grid).to_have_attribute("data-drawn", str(LAYERS * (HEADS + 2)), timeout=WAIT)
        assert seen["cancelled"] == 1  # released by the server's cancel, not its time limit
        expect(bar).to_be_hidden()
        tokens = page.get_by_test_id("wp-tokens")
        expect(tokens).to_contain_text("muddy")
        expect(page.get_by_test_id("model-status")).to_contain_text("tokens")


def test_the_bars_words(page: Page) -> None:
    page.goto("/model")
    said = page.evaluate(
        """async () => {
        const { progressText } = await import("/static/js/model-progress.js");
        const forward = { stage: "forward", done: 2, total: 8, elapsed_s: 2, eta_s: 6 };
        return [
            progressText(null),
            progressText({ stage: "queued", done: 0, total: 0, elapsed_s: 0, eta_s: null }),
            progressText(forward),
            progressText(forward, 4.4),
            progressText(forward, 5.8),
            progressText({ ...forward, done: 8, eta_s: 0 }),
            progressText({ stage: "generate", done: 3, total: 32, elapsed_s: 1, eta_s: 29 / 3 }),
        ];
    }"""
    )
    assert said == [
        "Running the model…",
        "Waiting for a free model thread…",
        "Forward pass: layer 2 of 8, about 6 s left",
        "Forward pass: layer 2 of 8, about 2 s left",
        "Forward pass: layer 2 of 8",  # later than the pace foretold: no estimate
        "Forward pass done: preparing the maps…",
        "Writing: token 3 of 32, about 10 s left",
    ]
