"""Every backend reports its forward pass per layer through ``attention_core.progress``,
and stops at the next layer once cancelled, caching nothing of the stopped pass:
the built-in BERT, the hand-written GPT-2, the transformers backend's decoder
(Qwen3) and encoder (RoBERTa), and an encoder-decoder (T5: the encoder's layers,
then the decoder's).  A generation reports each token written, not each layer
of each token's forward."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from attention_core.progress import Cancelled, reporting
from tests.models.checkpoints import make_gpt2
from tests.models.hf_checkpoints import make_hf
from tests.models.seq2seq_checkpoints import make_seq2seq
from tests.requires import require

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXT = "The bank approved the loan."
Report = tuple[str, int, int]


def reports_of(work: Callable[[], Any]) -> list[Report]:
    seen: list[Report] = []
    with reporting(lambda *r: seen.append(r)):
        work()
    return seen


def forward(total: int) -> list[Report]:
    return [("forward", n, total) for n in range(1, total + 1)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """name -> (a loaded model, its forward's layer count)."""
    require("transformers")
    from attention_core.models.families.bert import Encoder, default_model_dir
    from attention_core.models.hf.text_models import load_transformers
    from attention_core.models.registry.family_table import FAMILIES
    from attention_core.models.text.decoder import Decoder

    root = tmp_path_factory.mktemp("progress")
    make_gpt2(root / "gpt2", n_layer=3)
    make_hf(root / "qwen3", "tiny-qwen3")
    make_hf(root / "roberta", "tiny-roberta")
    make_seq2seq(root / "t5", "t5", num_layers=2, num_decoder_layers=3)
    family = next(f for f in FAMILIES if f.name == "gpt2")
    gpt2 = family.load(root / "gpt2", "gpt2", 48, 2**24)
    qwen3 = load_transformers(root / "qwen3", "q", 64, 2**24, kind="decoder", family="qwen3")
    for decoder in (gpt2, qwen3):
        assert isinstance(decoder, Decoder)
        decoder.eos_ids = frozenset()  # every generation writes all its tokens
    return {
        "bert": (Encoder.from_dir(default_model_dir()), 6),
        "gpt2": (gpt2, 3),
        "qwen3": (qwen3, 2),
        "roberta": (
            load_transformers(root / "roberta", "r", 64, 2**24, kind="encoder", family="roberta"),
            2,
        ),
        "t5": (
            load_transformers(root / "t5", "t", 64, 2**24, kind="encoder-decoder", family="t5"),
            5,
        ),
    }


@pytest.mark.parametrize("name", ["bert", "gpt2", "qwen3", "roberta", "t5"])
def test_a_forward_reports_each_layer_and_stops_once_cancelled(name: str, models) -> None:
    model, layers = models[name]
    text = f"{TEXT} ({name})"  # a text of this test only: never in the result cache before
    cancelled = threading.Event()
    seen: list[Report] = []

    def stop_after_first(*r: Any) -> None:
        seen.append(r)
        cancelled.set()

    with pytest.raises(Cancelled), reporting(stop_after_first, cancelled):
        model.encode(text)
    assert seen == [("forward", 1, layers)]  # the next layer's report raised
    # Nothing of the stopped pass was kept: the same text runs every layer again.
    assert reports_of(lambda: model.encode(text)) == forward(layers)
    assert reports_of(lambda: model.encode(text)) == []  # now it is cached


def test_t5_counts_the_encoders_layers_then_the_decoders(models) -> None:
    model, _ = models["t5"]
    assert (model.num_layers, model.num_decoder_layers) == (2, 3)
    assert model.forward_progress == {"encoder": (0, 2), "decoder": (2, 3)}


@pytest.mark.parametrize("name", ["gpt2", "qwen3"])
def test_a_generation_reports_the_prompts_layers_then_each_token(name: str, models) -> None:
    model, layers = models[name]
    seen = reports_of(lambda: model.generate("The bank", 4))
    assert seen[:layers] == forward(layers)  # the prompt's one forward pass
    tokens = seen[layers:]
    assert tokens == [("generate", n, 4) for n in range(1, 5)]


def test_a_generation_stops_at_the_token_after_it_is_cancelled(models) -> None:
    model, layers = models["gpt2"]
    cancelled = threading.Event()
    seen: list[Report] = []

    def stop_after_two_tokens(*r: Any) -> None:
        seen.append(r)
        if r == ("generate", 2, 8):
            cancelled.set()

    with pytest.raises(Cancelled), reporting(stop_after_two_tokens, cancelled):
        model.generate("The bank", 8)
    assert seen[-1] == ("generate", 2, 8)
    assert seen == [*forward(layers), ("generate", 1, 8), ("generate", 2, 8)]


def test_value_weighted_maps_report_each_layer_not_each_layers_forward(models) -> None:
    from attention_core.analysis import value_norm_shares

    model, layers = models["gpt2"]
    seen = reports_of(lambda: value_norm_shares(model, TEXT + " (value-weighted)"))
    # The plain pass, then one traced forward per layer, each reported as one layer done.
    assert seen == forward(layers) + [("value_norm", n, layers) for n in range(1, layers + 1)]
