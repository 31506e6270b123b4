"""A trained run (and the shipped one) read by transformers' ``AutoTokenizer`` gives the ids
the app and ``tokenizers`` give: the character vocabulary as it is, spaces kept."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from attention_core.models import TextTokenizer
from attention_core.training import preset_config, train
from tests.requires import require

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "attention_core" / "models" / "builtin" / "tiny-bank-gpt"
# The shipped weights, as trained: adding tokenizer_config.json must not touch them.
SHIPPED_WEIGHTS_SHA256 = "cff9fc641247212aa3e2314c592857c4161a1a784e65c8c1cea0ed05c31dc8ed"
TEXTS = [
    "the bank",
    "Kim rowed the boat, then went to the bank ",
    "  two  spaces,\nand a new line. ",
    "a b c",
]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("runs") / "tiny"
    tiny = {"n_layer": 1, "n_embd": 16, "block_size": 16, "batch_size": 4, "eval_iters": 2}
    config = preset_config("gpt", {**tiny, "max_steps": 2, "eval_every": 2, "sample_chars": 0})
    for _ in train(config, save_to=directory, run_info={"name": "tiny"}):
        pass
    return directory


def assert_same_ids(directory: Path) -> None:
    transformers = require("transformers")
    auto = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)
    ours = Tokenizer.from_file(str(directory / "tokenizer.json"))
    app = TextTokenizer(directory / "tokenizer.json", 1000)
    for text in TEXTS:
        ids = auto(text)["input_ids"]
        assert ids == ours.encode(text).ids == list(app.encode(text).input_ids), text
        assert len(ids) == len(text)  # one id a character, the spaces included
        assert auto.decode(ids) == text


def test_a_new_run_reads_the_same_with_auto_tokenizer(run: Path) -> None:
    assert_same_ids(run)


def test_the_shipped_model_reads_the_same_with_auto_tokenizer() -> None:
    assert_same_ids(SHIPPED)
    weights = (SHIPPED / "model.safetensors").read_bytes()
    assert hashlib.sha256(weights).hexdigest() == SHIPPED_WEIGHTS_SHA256
