"""A trained run on the pages: /model opens it with its probe, its own limits and plural
labels, spaces shown as ␣ as on /train; /train lists the saved runs and deletes one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from playwright.sync_api import Page, expect

from attention_core.training import preset_config, train
from devtools.server import serving
from tests.e2e.conftest import LOADED_WAIT as WAIT

pytestmark = pytest.mark.e2e
PROBE = "the bank of the river"
TINY = {"n_layer": 1, "n_head": 1, "n_embd": 16, "block_size": 24, "batch_size": 4}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two saved runs of one layer and one head, 2 steps each, probe PROBE."""
    root = tmp_path_factory.mktemp("runs")
    torch.set_num_threads(1)
    config = preset_config(
        "gpt",
        {**TINY, "max_steps": 2, "eval_every": 2, "eval_iters": 2, "sample_chars": 0,
         "probe": PROBE},
    )  # fmt: skip
    for _ in train(config, save_to=root / "tiny-run", run_info={"name": "tiny-run"}):
        pass
    shutil.copytree(root / "tiny-run", root / "spare-run")
    return root


@pytest.fixture(scope="module")
def server_url(runs_dir: Path) -> Iterator[str]:
    env = {"ATTENTION_VIZ_RUNS_DIR": str(runs_dir), "ATTENTION_VIZ_HF_CACHE": "0"}
    with serving(env) as url:
        yield url


def ticks(page: Page, testid: str) -> list[str]:
    return page.evaluate(
        "id => document.querySelector(`[data-testid='${id}']`).layout.yaxis.ticktext", testid
    )


def test_a_run_opens_with_its_probe_its_context_and_visible_spaces(page: Page) -> None:
    page.goto("/model?model=tiny-run")
    grid = page.get_by_test_id("head-grid")
    expect(grid).to_have_attribute("data-drawn", "3", timeout=WAIT)  # 1 layer × (1 head + 2)
    expect(page.get_by_test_id("model-text")).to_have_value(PROBE)
    expect(page.get_by_test_id("model-facts")).to_contain_text("1 layer × 1 head ·")
    expect(page.get_by_test_id("model-facts")).to_contain_text("reads up to 24 tokens")
    expect(page.get_by_test_id("model-status")).to_contain_text("(1 layer × 1 head)")
    # Character tokens: the spaces are ␣ chips, and ␣·N on the map's axis, as on /train.
    expect(page.get_by_test_id("wp-token")).to_have_text([c if c != " " else "␣" for c in PROBE])
    expect(page.get_by_test_id("zoom-plot")).to_have_attribute("data-tokens", str(len(PROBE)))
    labels = ticks(page, "zoom-plot")
    spaces = [i for i, c in enumerate(PROBE) if c == " "]
    assert [labels[i] for i in spaces] == [f"␣·{i}" for i in spaces]
    assert labels[PROBE.index("k")] == "k"  # there once: no position
    assert "model=tiny-run" in page.url and "text=" not in page.url  # the probe is its default
    # Generation: the prompt is the probe, and the limit is this model's context.
    page.goto("/model?model=tiny-run&gen=1&n=2")
    expect(page.get_by_test_id("gen-prompt")).to_have_value(PROBE)
    expect(page.get_by_test_id("gen-max-help")).to_have_text(
        "at most 23: this model reads 24 tokens, prompt included"
    )
    summary = page.get_by_test_id("gen-summary")
    expect(summary).to_contain_text("greedy", timeout=WAIT)
    expect(summary).not_to_contain_text("seed")


def test_the_shipped_model_keeps_the_servers_limit_and_its_own_probe(page: Page) -> None:
    page.goto("/model?model=tiny-bank-gpt&gen=1")
    expect(page.get_by_test_id("gen-prompt")).to_have_value(
        "Kim rowed the boat, then went to the bank "
    )
    expect(page.get_by_test_id("gen-max-help")).to_contain_text(
        "at most 63: this model reads 64 tokens"
    )
    # Back to the default encoder: its texts become the page's defaults again.
    page.get_by_test_id("model-pick").select_option("sentence-transformers/all-MiniLM-L6-v2")
    expect(page.get_by_test_id("model-text")).to_have_value(
        "The cat sat on the mat because it was tired."
    )


def test_train_lists_the_runs_and_deletes_one(page: Page, runs_dir: Path) -> None:
    training = json.loads((runs_dir / "tiny-run" / "training.json").read_text())
    page.goto("/train")
    runs = page.get_by_test_id("run")
    expect(runs).to_have_count(2)
    expect(page.get_by_test_id("runs-dir")).to_contain_text(str(runs_dir))
    tiny = page.locator("[data-testid='run'][data-name='tiny-run']")
    expect(tiny.get_by_test_id("run-settings")).to_have_text(
        "5 · GPT blocks · 1 layer × 1 head · n_embd 16 · block_size 24 · 2 steps · "
        f"{training['parameters']:,} parameters"
    )
    expect(tiny.get_by_test_id("run-losses")).to_contain_text(
        f"val loss {training['val_loss']:.4f} · train {training['train_loss']:.4f}"
    )
    expect(tiny.get_by_test_id("run-link")).to_have_attribute("href", "/model?model=tiny-run")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("[data-testid='run'][data-name='spare-run']").get_by_test_id("run-delete").click()
    expect(runs).to_have_count(1)
    assert not (runs_dir / "spare-run").exists() and (runs_dir / "tiny-run").is_dir()
