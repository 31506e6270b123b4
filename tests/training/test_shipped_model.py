"""The trained model that ships in the package (attention_core/models/builtin/tiny-bank-gpt):
made by `attention-viz train` from the shipped corpus, reproducible from its seed, a GPT-2
checkpoint transformers loads, small, carried by a wheel, and it has learnt what the
corpus is for: a head looks back from "bank " to the word that decides the next letter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from attention_core.models import GPT2
from attention_core.training import (
    DEFAULT_PROBE,
    Progress,
    bigram_baseline,
    default_text,
    make_corpus,
    preset_config,
    train,
)
from attention_core.training.batches import estimate_loss
from attention_core.training.corpus import text_sha256
from tests.requires import require
from tests.training.eager_check import same_as_eager

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "attention_core" / "models" / "builtin" / "tiny-bank-gpt"
FILES = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "training.json",
]
# The command in docs/training.md that made it.
STEPS, SEED = 2000, 1337

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def training() -> dict:
    return json.loads((SHIPPED / "training.json").read_text())


@pytest.fixture(scope="module")
def model() -> GPT2:
    return GPT2.from_pretrained(SHIPPED)


def test_it_is_a_small_checkpoint_of_the_shipped_corpus(training: dict) -> None:
    assert sorted(p.name for p in SHIPPED.iterdir()) == FILES
    assert sum(p.stat().st_size for p in SHIPPED.iterdir()) <= 5_000_000
    assert training["corpus"]["sha256"] == text_sha256(default_text())
    assert training["text_source"] == "shipped corpus"
    expected = preset_config("gpt", {"max_steps": STEPS, "seed": SEED}).effective().to_dict()
    assert training["config"] == expected
    assert training["steps"] == STEPS


def test_transformers_loads_it_with_the_same_logits(model: GPT2) -> None:
    transformers = require("transformers")
    reference = transformers.GPT2LMHeadModel.from_pretrained(
        SHIPPED, attn_implementation="eager", dtype=torch.float32
    ).eval()
    tokenizer = Tokenizer.from_file(str(SHIPPED / "tokenizer.json"))
    ids = torch.tensor([tokenizer.encode(DEFAULT_PROBE).ids])
    same_as_eager(model, reference, ids)


def test_its_val_loss_is_the_recorded_one_and_far_under_the_bigram(
    model: GPT2, training: dict
) -> None:
    config = preset_config("gpt", {})
    corpus = make_corpus(default_text(), config.block_size)
    loss = estimate_loss(
        model, corpus.val, config.block_size, config.batch_size, config.eval_iters, SEED + 1
    )
    assert loss == pytest.approx(training["val_loss"], abs=1e-5)
    assert training["baseline_val_loss"] == pytest.approx(bigram_baseline(corpus), abs=1e-12)
    assert loss < training["baseline_val_loss"] - 1.0


LETTERS = {"river": set("bnou"), "money": set("aftw")}
CASES = [
    ("Kim rowed the boat, then went to the bank ", "boat", "river"),
    ("Kim counted the cash, then went to the bank ", "cash", "money"),
    ("Max fed the ducks, then walked down to the bank ", "ducks", "river"),
    ("Ann needed a loan, then ran to the bank ", "loan", "money"),
]


@pytest.mark.parametrize(("text", "cue", "sense"), CASES)
def test_a_head_looks_back_at_the_deciding_word(
    model: GPT2, text: str, cue: str, sense: str
) -> None:
    tokenizer = Tokenizer.from_file(str(SHIPPED / "tokenizer.json"))
    ids = torch.tensor([tokenizer.encode(text).ids])
    with torch.inference_mode():
        out = model(ids, output_attentions=True)
    # The next letter: the cue's sense gets most of the probability.
    probs = torch.softmax(out.logits[0, -1], dim=-1)
    mass = sum(float(probs[tokenizer.token_to_id(c)]) for c in LETTERS[sense])
    assert mass > 0.7, (text, mass)
    # Some head's last row (the space after "bank") puts a third of its weight on the cue.
    start = text.index(cue)
    on_cue = max(
        float(layer[0, head, -1, start : start + len(cue)].sum())
        for layer in out.attentions
        for head in range(layer.shape[1])
    )
    assert on_cue > 0.3, (text, on_cue)


def test_the_command_reproduces_its_first_losses(training: dict) -> None:
    """The command of docs/training.md, run for its first 100 steps: the recorded losses again."""
    config = preset_config("gpt", {"max_steps": STEPS, "seed": SEED})
    recorded = {h["step"]: h["val_loss"] for h in training["history"]}
    events = train(config)
    got = {}
    for event in events:
        if isinstance(event, Progress) and event.val_loss is not None:
            got[event.step] = event.val_loss
            if event.step == 100:
                break
    events.close()
    assert sorted(got) == [0, 50, 100]
    for step, loss in got.items():
        assert loss == pytest.approx(recorded[step], abs=1e-4), step


def test_a_wheel_carries_the_model_and_the_corpus(tmp_path: Path) -> None:
    """``pip install .`` (not only editable) installs them: the package data is declared."""
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the work tree
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("attention_core", "app", "static", "templates"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("attention_viz-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in FILES:
        assert f"attention_core/models/builtin/tiny-bank-gpt/{name}" in names
    assert "attention_core/training/data/bank_stories.txt" in names
    assert "attention_core/training/data/README.md" in names
