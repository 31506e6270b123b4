"""The explorer page (``/``) as its tests open it: drawn, and its plots ready; and the
MiniLM vectors it may ask for made unavailable (a 503 from the API)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import wait_for_plot


def open_explorer(page: Page, query: str = "") -> None:
    page.goto(f"/{query}")
    wait_ready(page)
    wait_for_plot(page, "plot-attn_weights")


def wait_ready(page: Page, timeout: float = 30_000) -> None:
    """Every plot of the current view is drawn (the explorer sets data-ready when done).

    30 s: a cold first load on a busy shared 2-core machine can take more than 5 s."""
    expect(page.locator("main")).to_have_attribute("data-ready", re.compile(r".+"), timeout=timeout)


def embeddings_unavailable(page: Page) -> None:
    """``POST /api/model/embeddings`` answers 503, as a server without MiniLM does."""
    page.route(
        "**/api/model/embeddings",
        lambda route: route.fulfill(
            status=503,
            content_type="application/json",
            body='{"detail": [{"loc": [], "msg": "no checkpoint", "type": "unavailable"}]}',
        ),
    )
