"""Which backend runs a checkpoint, and the hand-written families checked against the
transformers backend: the same checkpoint gives the same maps through both."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attention_core.models import Decoder, Encoder, ModelRegistry, default_model_dir
from attention_core.models.checkpoints.files import read_json
from attention_core.models.registry import backends
from attention_core.models.registry.family_table import family_of, transformers_family
from tests.models.checkpoints import write_config
from tests.requires import require

transformers = require("transformers")

TEXT = "The bank approved the loan, and the river bank was muddy."


def _through_transformers(path: Path) -> Decoder:
    raw = read_json(path / "config.json")
    family = transformers_family(raw, str(raw["model_type"]))
    assert (family.backend, family.kind) == ("transformers", "decoder")
    model = family.load(path, path.name, 512, 1 << 20)
    assert isinstance(model, Decoder)
    return model


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-qwen2"])
def test_hand_written_decoders_equal_the_transformers_backend(checkpoints: Path, name: str) -> None:
    path = checkpoints / name
    registry = ModelRegistry(include_package=False, builtin_dir=None, env_paths=[path])
    (entry,) = registry.entries()
    assert entry.backend == "core"
    core = registry.load(name)
    assert isinstance(core, Decoder)
    other = _through_transformers(path)
    ours, theirs = core.encode(TEXT), other.encode(TEXT)
    assert ours.tokens == theirs.tokens
    for a, b in zip(ours.layer_attentions, theirs.layer_attentions, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    for a, b in zip(ours.layer_hidden_states, theirs.layer_hidden_states, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert core.generate("The bank", 8).new_ids == other.generate("The bank", 8).new_ids
    sampled = {"temperature": 0.9, "top_k": 8, "seed": 3}
    assert (
        core.generate("The bank", 8, **sampled).new_ids  # type: ignore[arg-type]
        == other.generate("The bank", 8, **sampled).new_ids  # type: ignore[arg-type]
    )


def test_bert_equals_the_transformers_backend(encoder: Encoder) -> None:
    from attention_core.models.hf.language_model import TransformersLM

    model = TransformersLM.load(default_model_dir(), "encoder")
    tokenized = encoder.tokenize(TEXT)
    ours = encoder.encode(TEXT)
    with torch.inference_mode():
        out = model(
            torch.tensor([tokenized.input_ids]), output_attentions=True, output_hidden_states=True
        )
    assert len(out.attentions) == len(ours.layer_attentions) == 6
    for a, b in zip(ours.layer_attentions, out.attentions, strict=True):
        torch.testing.assert_close(a, b[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("config", "backend"),
    [
        ({"model_type": "mistral", "sliding_window": 64, "max_position_embeddings": 64}, "core"),
        ({"model_type": "mistral", "sliding_window": None}, "core"),
        ({"model_type": "mistral", "sliding_window": 16, "max_position_embeddings": 64}, "hf"),
        ({"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 8}, "hf"),
        ({"model_type": "qwen3"}, "hf"),
        ({"model_type": "gpt2"}, "core"),
    ],
)
def test_routing(config: dict[str, object], backend: str) -> None:
    family = family_of(config)
    assert family.backend == ("core" if backend == "core" else "transformers")


def test_without_transformers_the_reason_names_the_install_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backends, "transformers_installed", lambda: False)
    write_config(tmp_path / "qwen3", {"model_type": "qwen3"})
    write_config(tmp_path / "window", {"model_type": "mistral", "sliding_window": 16})
    write_config(tmp_path / "t5", {"model_type": "t5"})
    registry = ModelRegistry(include_package=False, builtin_dir=None, env_paths=[tmp_path])
    entries = {e.name: e for e in registry.entries()}
    for name in ("qwen3", "window", "t5"):
        reason = entries[name].reason
        assert reason is not None and "pip install 'attention-viz[transformers]'" in reason
    assert "needs the transformers backend, which is not installed" in str(entries["qwen3"].reason)
    assert "sliding-window attention is not supported" in str(entries["window"].reason)
    assert (entries["t5"].backend, entries["t5"].kind) == ("transformers", "encoder-decoder")
