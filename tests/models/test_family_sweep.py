"""A representative part of the family sweep (``bench/sweep_families.py``) in the suite:
each model type's default config shrunk, a random checkpoint written by transformers,
listed and loaded by the app, its maps compared with transformers' eager attention; and
the dry run that lists a family before any request (``hf.probe``), once per family."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from attention_core.models.hf import probe
from tests.requires import require

transformers = require("transformers")

SWEEP = Path(__file__).resolve().parents[2] / "bench" / "sweep_families.py"


@pytest.fixture(scope="module")
def sweep() -> Any:
    spec = importlib.util.spec_from_file_location("sweep_families", SWEEP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# One of each way a type opens or is refused: the attention interface (decoder, encoder,
# encoder-decoder, a vision-language model's text backbone), an adapter, a shared module.
# DeepSeek-V3 (MLA, expert groups) and GPT-Neo were listed supported, then refused at load
# (a shrinking that broke head_dim = qk_rope_head_dim; GPT-Neo's own table of attention
# classes): both open now.  XMOD, then refused at load, is now refused when listed.
OPENS = [
    "qwen2",
    "roberta",
    "t5",
    "llava",
    "bloom",
    "deberta-v2",
    "deberta",
    "fsmt",
    "led",
    "albert",
    "deepseek_v3",
    "gpt_neo",
    "stablelm",  # its layers do not pass their keywords on to the attention module
]
REFUSED = {
    "longformer": "computes attention in 0 of its 2 layers",
    "mamba": "has no attention heads",
    "xmod": "Input language unknown",
    "voxtral": "reads sound",
    "deepseek_v4": "attend to compressed entries",
    "granite_speech": "reads sound (its config's encoder_config is an audio encoder's)",
    "encoder-decoder": "generic EncoderDecoderModel: two separate models joined (a bert",
}


@pytest.mark.parametrize("model_type", OPENS)
def test_opens_and_equals_eager_attention(model_type: str, sweep: Any, tmp_path: Path) -> None:
    record = sweep.try_type(model_type, tmp_path)
    assert record["status"] == "equal", record
    assert record["max_abs_diff"] <= 1e-5


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_refused_when_listed_with_the_reason(model_type: str, sweep: Any, tmp_path: Path) -> None:
    record = sweep.try_type(model_type, tmp_path)
    assert record["status"] == "refused", record
    assert REFUSED[model_type] in record["reason"]
    assert record["when"] == "listed"  # never listed supported, then refused


def test_deepseek_v4s_maps_equal_eager_attention_though_it_is_refused(
    sweep: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its compressed-sparse layer adds its 0 / -inf block bias to the mask: on a boolean mask
    the hidden entries read "may attend" (its maps differed by 0.48); with the additive mask
    it is loaded with, every map, compressed columns included, is eager attention's."""
    from attention_core.models.registry import backends

    monkeypatch.setattr(backends, "KEYS_NOT_TOKENS", {})
    record = sweep.try_type("deepseek_v4", tmp_path)
    assert record["status"] == "equal", record
    assert record["max_abs_diff"] <= 1e-5


def test_the_sweep_covers_every_text_model_type(sweep: Any) -> None:
    types = sweep.model_types()
    assert len(types) == len(set(types)) > 200
    assert {"bloom", "mpt", "falcon", "deberta-v2", "albert", "fsmt", "led"} <= set(types)


def test_each_family_is_dry_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import CONFIG_MAPPING

    runs: list[str] = []
    real = probe.dry_run

    def counted(raw: Any, kind: str) -> str | None:
        runs.append(str(raw["model_type"]))
        return real(raw, kind)

    monkeypatch.setattr(probe, "dry_run", counted)
    monkeypatch.setattr(probe, "_verdicts", {})
    raw = CONFIG_MAPPING["mpt"]().to_dict()
    bigger = {**raw, "n_layers": 48, "d_model": 4096, "vocab_size": 50432}
    assert probe.verdict(raw, "decoder") is None
    assert probe.verdict(bigger, "decoder") is None  # sizes aside, the same family
    assert runs == ["mpt"]
    assert probe.verdict({**raw, "no_bias": not raw["no_bias"]}, "decoder") is None
    assert runs == ["mpt", "mpt"]  # another setting: tried again


def test_the_dry_run_model_is_tiny() -> None:
    from transformers import CONFIG_MAPPING

    raw = CONFIG_MAPPING["llama"]().to_dict()  # 7B's defaults: 32 layers of 32 heads of 128
    model = probe.build_tiny(raw, "decoder")
    config = model.config
    assert (config.num_hidden_layers, config.num_attention_heads) == (2, 4)
    assert config.hidden_size // config.num_attention_heads == 128  # the head size kept
    assert sum(p.numel() for p in model.parameters()) < 8_000_000
