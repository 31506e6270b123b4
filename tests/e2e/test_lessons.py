"""The lessons: sliders fetch new numbers from the API and redraw."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import api, plot_data, wait_for_plot

pytestmark = pytest.mark.e2e


def test_dimension_slider_changes_variance_plot(page: Page, server_url: str) -> None:
    page.goto("/lessons")
    expect(page.locator("main")).to_have_attribute("data-ready", "1")
    wait_for_plot(page, "plot-variance")
    assert plot_data(page, "plot-variance", field="x")[-1] == 64
    page.get_by_test_id("dim-slider").fill("3")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-variance']\").data[0].x.length === 4"
    )
    expected = api(
        server_url,
        "/api/lessons/scaling?dims=1&dims=2&dims=4&dims=8&trials=2000&seed=0&scores=0&scales=1",
    )
    assert plot_data(page, "plot-variance", 0, "y") == [
        r["variance_unscaled"] for r in expected["variance"]
    ]
    assert plot_data(page, "plot-variance", 1, "y") == [
        r["variance_scaled"] for r in expected["variance"]
    ]
    expect(page.get_by_test_id("variance-readout")).to_contain_text("d_k = 8")
    assert "dim=3" in page.url


def test_scale_slider_sharpens_softmax(page: Page, server_url: str) -> None:
    page.goto("/lessons")
    expect(page.locator("main")).to_have_attribute("data-ready", "1")
    wait_for_plot(page, "plot-sharpness")
    before = plot_data(page, "plot-sharpness", 1, "y")
    page.get_by_test_id("scale-slider").fill("16")
    page.wait_for_function(
        "before => JSON.stringify(document.querySelector(\"[data-testid='plot-sharpness']\")"
        ".data[1].y) !== JSON.stringify(before)",
        arg=before,
    )
    after = plot_data(page, "plot-sharpness", 1, "y")
    assert max(after) > max(before) > 0.2
    q = "&".join(f"scores={s}" for s in (0.1, -0.2, 0.3, 0.9, 0.5))
    expected = api(
        server_url, f"/api/lessons/scaling?dims=1&trials=2&seed=0&{q}&scales=1&scales=16"
    )
    assert after == expected["sharpness"][1]["weights"]
    expect(page.get_by_test_id("sharpness-readout")).to_contain_text(
        f"{expected['sharpness'][1]['max_weight']:.3f}"
    )


def test_causal_average_is_tril_and_head_is_learned(page: Page) -> None:
    page.goto("/lessons")
    expect(page.locator("main")).to_have_attribute("data-ready", "1")
    avg = plot_data(page, "plot-avg-weights")
    for i, row in enumerate(avg):
        for j, w in enumerate(row):
            assert abs(w - (1 / (i + 1) if j <= i else 0)) < 1e-6
    head = plot_data(page, "plot-head-weights")
    assert any(abs(head[i][0] - 1 / (i + 1)) > 0.01 for i in range(1, len(head)))
    assert all(head[i][j] == 0 for i in range(len(head)) for j in range(i + 1, len(head)))
    masked = plot_data(page, "plot-avg-masked")
    assert masked[0][1] is None and masked[1][0] == 0
