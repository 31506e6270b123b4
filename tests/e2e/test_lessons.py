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


# ---------- issue 14: the lesson's own controls never produce a 4xx ----------


def test_largest_controls_stay_within_the_server_limits(page: Page, server_url: str) -> None:
    """d_k = 1024 (2047 dimensions summed × 2000 pairs is over the 4,000,000 budget): the
    page asks for fewer pairs instead of a 422. The page fixture fails on any 4xx."""
    page.goto("/lessons")
    expect(page.locator("main")).to_have_attribute("data-ready", "1", timeout=30_000)
    slider = page.get_by_test_id("dim-slider")
    assert slider.get_attribute("max") == "10"
    slider.fill("10")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-variance']\").data[0].x.length === 11"
    )
    readout = page.get_by_test_id("variance-readout")
    expect(readout).to_contain_text("d_k = 1024")
    expect(readout).to_contain_text("(1954 random pairs)")
    assert plot_data(page, "plot-variance", field="x")[-1] == 1024
    dims = "&".join(f"dims={2**i}" for i in range(11))
    expected = api(server_url, f"/api/lessons/scaling?{dims}&trials=1954&seed=0&scores=0&scales=1")
    assert plot_data(page, "plot-variance", 0, "y") == [
        r["variance_unscaled"] for r in expected["variance"]
    ]
    # The largest scale and as many scores as the server takes.
    page.get_by_test_id("scale-slider").fill("20")
    scores = page.get_by_test_id("scores-input")
    scores.fill(" ".join(str(i / 10) for i in range(64)))
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='plot-sharpness']\").data[0].y.length === 64"
    )
    expect(page.get_by_test_id("sharpness-readout")).to_contain_text("× 20")
    # One score more is refused by the page itself, beside the box, and the plot is stale.
    scores.fill(" ".join(str(i / 10) for i in range(65)))
    expect(page.get_by_test_id("error-scores")).to_contain_text("65 scores")
    expect(page.get_by_test_id("error-scores")).to_contain_text("at most 64")
    expect(scores).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("plot-sharpness")).to_have_attribute("data-stale", "true")
    expect(page.get_by_test_id("stale-sharpness")).to_be_visible()
    scores.fill("1 2 x")
    expect(page.get_by_test_id("error-scores")).to_contain_text("“x” is not a number")
    scores.fill("1 2 3")
    expect(page.get_by_test_id("plot-sharpness")).not_to_have_attribute("data-stale", "true")
    expect(page.get_by_test_id("error-scores")).to_be_empty()


def test_controls_follow_a_server_with_smaller_limits(browser) -> None:
    """The limits come from the server (initial data = GET /api/limits), not from the page."""
    from devtools.server import start_server, stop_server

    env = {"ATTENTION_VIZ_MAX_LESSON_DIM": "256", "ATTENTION_VIZ_MAX_LESSON_SAMPLES": "50000"}
    url, process = start_server(env)
    context = browser.new_context(base_url=url)
    page = context.new_page()
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status))
    try:
        page.goto("/lessons")
        expect(page.locator("main")).to_have_attribute("data-ready", "1", timeout=30_000)
        slider = page.get_by_test_id("dim-slider")
        assert slider.get_attribute("max") == "8"  # 2^8 = 256
        slider.fill("8")
        page.wait_for_function(
            "() => document.querySelector(\"[data-testid='plot-variance']\").data[0].x.length === 9"
        )
        # 50,000 samples over dims summing to 511: 97 pairs per dimension.
        expect(page.get_by_test_id("variance-readout")).to_contain_text("(97 random pairs)")
        assert all(s < 400 for s in statuses), statuses
    finally:
        context.close()
        stop_server(process)
