"""The model page's head-scores grid and one-head ablation, each checked against the API's
answer for the same text (test_model_heads_hf at a few tokens, test_model_4k at 4,096),
and the colours of a grid of signed values (test_model_heads, test_model_why)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import api


def scores_are_the_apis(
    page: Page, server_url: str, body: dict[str, Any], heads: list[tuple[int, int]]
) -> dict[str, Any]:
    """The drawn grid's previous-token cells of ``heads`` equal ``POST /api/model/head-scores``
    for ``body``; returns that answer."""
    scores = api(server_url, "/api/model/head-scores", body)
    for layer, head in heads:
        cell = page.get_by_test_id(f"score-grid-L{layer}-H{head}")
        value = float(cell.get_attribute("data-value") or "nan")
        assert value == pytest.approx(scores["previous_token"][layer - 1][head - 1], abs=1e-6)
    return scores


def ablate_one_head(page: Page, server_url: str, body: dict[str, Any], wait: int) -> dict[str, Any]:
    """Ablates ``body``'s one head from the page's grid; its summary shows the losses of
    ``POST /api/model/ablate`` for ``body``, which is returned."""
    ((layer, head),) = body["heads"]
    page.get_by_test_id(f"ablate-grid-L{layer}-H{head}").click()
    page.get_by_test_id("ablate-run").click()
    expect(page.get_by_test_id("ablate-card")).to_have_attribute("data-drawn", "1", timeout=wait)
    answer = api(server_url, "/api/model/ablate", body)
    loss = f"loss {answer['loss_before']:.3f} → {answer['loss_after']:.3f} nats"
    summary = page.get_by_test_id("ablate-summary")
    expect(summary).to_contain_text(f"Without L{layer} H{head} (zero): {loss}")
    return answer


def signed_colours(grid: Locator) -> None:
    """A signed grid (a Δloss) is red above 0 and blue below it, white at 0: no cell's
    colour contradicts its sign, and the cell of the largest |value| is the scale's end."""
    cells = []
    for cell in grid.locator(".hg-cell").all():
        value = float(cell.get_attribute("data-value") or "nan")
        background = cell.evaluate("c => getComputedStyle(c).backgroundColor")
        r, _, b = (int(x) for x in re.findall(r"\d+", background)[:3])
        assert not (value > 0 and r < b) and not (value < 0 and r > b), (value, background)
        cells.append((abs(value), value, (r, b)))
    _, value, (r, b) = max(cells)
    assert (r, b) == ((202, 32) if value > 0 else (5, 176)), value  # #ca0020, #0571b0
