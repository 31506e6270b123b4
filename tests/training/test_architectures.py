"""The ladder as configurations of the one GPT-2 class: each rung computes what it claims,
its fixed parts stay at zero through training, and it saves as a checkpoint that
transformers loads with the same logits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from attention_core import uniform_causal_weights
from attention_core.errors import SpecError
from attention_core.models import GPT2
from attention_core.training import (
    ARCHITECTURES,
    Done,
    TrainConfig,
    build_model,
    parameter_count,
    preset_config,
    train,
)
from attention_core.training.checkpoint import TRAINING_FILE
from tests.requires import require
from tests.training.eager_check import same_as_eager

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = require("transformers")
torch.set_num_threads(1)

TINY = {"n_embd": 16, "block_size": 16, "batch_size": 4, "eval_iters": 2, "sample_chars": 0}
TEXT = "Ann rowed the boat, then went to the bank and sat down. " * 40


def tiny(architecture: str, **overrides: object) -> TrainConfig:
    overrides = {**TINY, "max_steps": 12, "eval_every": 6, **overrides}
    return preset_config(architecture, overrides, TEXT)


def trained(config: TrainConfig, directory: Path) -> GPT2:
    events = list(train(config, TEXT, save_to=directory))
    assert isinstance(events[-1], Done)
    return GPT2.from_pretrained(directory)


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_parameter_count_matches_the_built_model(architecture: str) -> None:
    config = preset_config(architecture, {"n_embd": 24, "block_size": 10})
    built = build_model(config, vocab_size=37)
    assert parameter_count(config, 37) == sum(p.numel() for p in built.model.parameters())


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_fixed_parts_stay_zero_and_the_checkpoint_matches_transformers(
    architecture: str, tmp_path: Path
) -> None:
    config = tiny(architecture, n_layer=2, n_head=2, dropout=0.1)
    torch.manual_seed(config.seed)
    fresh = build_model(config, vocab_size=20)
    for name in fresh.frozen:
        param = dict(fresh.model.named_parameters())[name]
        assert not param.requires_grad, name

    model = trained(config, tmp_path / architecture)
    state = model.state_dict()
    for name in fresh.frozen:
        if name.endswith("ln_2.weight"):
            assert bool((state[name] == 1).all()), name
        else:
            assert bool((state[name] == 0).all()), name
    if architecture == "average":
        weight = state["transformer.h.0.attn.c_attn.weight"]
        bias = state["transformer.h.0.attn.c_attn.bias"]
        assert bool((weight[:, :32] == 0).all()) and bool((bias[:32] == 0).all())
        assert float(weight[:, 32:].abs().sum()) > 0  # the values did train

    reference = transformers.GPT2LMHeadModel.from_pretrained(
        tmp_path / architecture, attn_implementation="eager", dtype=torch.float32
    ).eval()
    ids = torch.randint(
        0, model.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
    )
    same_as_eager(model, reference, ids)
    training = json.loads((tmp_path / architecture / TRAINING_FILE).read_text())
    assert training["architecture"] == architecture
    assert sorted(training["fixed_at_zero"]) == sorted(fresh.frozen)


def test_rungs_build_the_sizes_they_claim() -> None:
    sizes = {
        name: (
            tiny(name, n_layer=3, n_head=4).effective_layers,
            tiny(name, n_head=4).effective_heads,
        )
        for name in ARCHITECTURES
    }
    assert sizes == {
        "bigram": (0, 1),
        "average": (1, 1),
        "single_head": (1, 1),
        "multi_head": (1, 4),
        "gpt": (3, 4),
    }


def test_bigram_logits_depend_on_the_current_character_only(tmp_path: Path) -> None:
    model = trained(tiny("bigram"), tmp_path / "bigram")
    assert model.config.n_layer == 0 and not model.config.tie_word_embeddings
    a = torch.tensor([[3, 5, 7, 9, 2]])
    b = torch.tensor([[8, 1, 4, 0, 2]])
    with torch.inference_mode():
        la, lb = model(a).logits, model(b).logits
    torch.testing.assert_close(la[0, -1], lb[0, -1], rtol=0, atol=0)
    same = model(torch.tensor([[2, 2, 2]])).logits[0]
    torch.testing.assert_close(same[0], same[2], rtol=0, atol=0)  # position makes no difference


def test_average_attends_uniformly_to_the_past(tmp_path: Path) -> None:
    model = trained(tiny("average"), tmp_path / "average")
    ids = torch.randint(
        0, model.config.vocab_size, (1, 11), generator=torch.Generator().manual_seed(1)
    )
    with torch.inference_mode():
        (weights,) = model(ids, output_attentions=True).attentions
    torch.testing.assert_close(weights[0, 0], uniform_causal_weights(11), rtol=0, atol=1e-7)


def test_one_layer_rungs_have_no_mlp_output(tmp_path: Path) -> None:
    model = trained(tiny("single_head"), tmp_path / "single")
    block = model.transformer.h[0]
    x = torch.randn(2, 5, 16)
    with torch.inference_mode():
        assert bool((block.mlp(block.ln_2(x)) == 0).all())


def test_unknown_architecture_and_bad_sizes_name_the_field() -> None:
    with pytest.raises(SpecError, match="architecture 'transformer' is unknown; use one of") as e:
        preset_config("transformer", {})
    assert e.value.field == "architecture"
    with pytest.raises(SpecError, match=r"n_embd \(30\) is not a multiple of n_head \(4\)"):
        tiny("multi_head", n_embd=30, n_head=4)
    with pytest.raises(SpecError, match="probe is 20 characters; the model reads at most") as e:
        tiny("gpt", probe="x" * 20)
    assert e.value.field == "probe"
    with pytest.raises(SpecError, match="learning_rate is 2.0"):
        tiny("gpt", learning_rate=2.0)
    with pytest.raises(SpecError, match="unknown training setting"):
        TrainConfig.from_dict({"n_layers": 3})
