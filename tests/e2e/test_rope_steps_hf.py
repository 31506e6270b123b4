"""A transformers-backed RoPE head step by step (a tiny random Qwen3: q/k norms, RoPE, GQA):
the API gives q and k before the rotation, as for the hand-written Llama, equal to
q_norm(q_proj(x)) computed with transformers' own modules; the page's titles say so."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import torch
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LOADED_WAIT as WAIT
from tests.e2e.conftest import api, plot_data, wait_for_plot
from tests.e2e.servers import models_server
from tests.models.hf_checkpoints import make_hf
from tests.requires import require

pytestmark = [pytest.mark.e2e, pytest.mark.model]

MODEL = "tiny-qwen3"
TEXT = "The bank approved the loan by the river."
SHOTS = os.environ.get("ATTENTION_VIZ_SCREENSHOTS")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("rope-steps-models")
    make_hf(root / MODEL, MODEL)
    return root


@pytest.fixture(scope="module")
def server_url(models: Path) -> Iterator[str]:
    with models_server(models) as url:
        yield url


def test_the_head_gives_q_and_k_before_rope_as_transformers_computes_them(
    server_url: str, models: Path
) -> None:
    import transformers

    body = {"model": MODEL, "text": TEXT, "layer": 2, "head": 3}
    answer = api(server_url, "/api/model/head", body)
    assert answer["rope"] is True and answer["qk_norm"] is True
    steps = answer["heads"][0]
    x = torch.tensor(answer["x"])  # (T, C): the attention module's input
    model = transformers.AutoModelForCausalLM.from_pretrained(
        models / MODEL, attn_implementation="eager", dtype=torch.float32
    )
    attention = model.model.layers[1].self_attn
    d = attention.head_dim
    with torch.no_grad():
        q = attention.q_norm(attention.q_proj(x).view(len(x), -1, d))[:, 2]
        k = attention.k_norm(attention.k_proj(x).view(len(x), -1, d))[:, answer["kv_head"] - 1]
    torch.testing.assert_close(torch.tensor(steps["q_unrotated"]), q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.tensor(steps["k_unrotated"]), k, atol=1e-5, rtol=1e-5)
    # The rotation leaves position 0 alone and turns the others.
    assert steps["q"][0] == pytest.approx(steps["q_unrotated"][0], abs=1e-5)
    assert steps["q"][3] != pytest.approx(steps["q_unrotated"][3], abs=1e-3)


@pytest.mark.parametrize("width", [1440, 390])
def test_the_step_by_step_page_names_the_norm_and_the_rotation(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/?real={MODEL}&text={quote(TEXT)}&layer=2&head=3")
    expect(page.locator("main")).to_have_attribute("data-ready", "real", timeout=WAIT)
    wait_for_plot(page, "plot-q_unrotated")
    assert plot_data(page, "plot-q_unrotated") is not None
    expect(page.locator("[data-step='q'] .step-title")).to_have_text(
        "q = RoPE(q_norm(x @ W_query))"
    )
    expect(page.locator("[data-step='q_unrotated'] .step-title")).to_have_text(
        "q before RoPE = q_norm(x @ W_query)"
    )
    expect(page.locator("[data-step='k_unrotated'] .step-title")).to_have_text(
        "k before RoPE = k_norm(x @ W_key)"
    )
    expect(page.get_by_test_id("real-head-facts")).to_contain_text("rotary positions (RoPE)")
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"rope-steps-qwen3-{width}.png"), full_page=True)
