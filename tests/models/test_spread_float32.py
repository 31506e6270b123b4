"""A bf16 model spread by accelerate over memory and disk computes each layer in float32,
and its load (transformers reading it) reports its progress.

Oracles: the same checkpoint held in memory by the hand-written family (bf16
weights, float32 layers: ``test_held_weights``) and transformers' float32 eager
attention, to float32 rounding; the held weights' dtype.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from attention_core.models import Decoder, ModelRegistry, read_header
from attention_core.models.checkpoints.weight_dtype import held_bytes
from attention_core.progress import Cancelled, reporting
from tests.models.checkpoints import make_llama
from tests.models.registries import registry_of
from tests.requires import require

TEXT = "The bank approved the loan, and the river bank was muddy."


def eager_float32(path: Path, ids: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    transformers = require("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, attn_implementation="eager", dtype=torch.float32, local_files_only=True
    ).eval()
    with torch.inference_mode():
        out = model(torch.tensor([ids]), output_attentions=True)
    return tuple(a[0] for a in out.attentions)


def test_a_spread_bf16_model_runs_its_layers_in_float32(tmp_path: Path) -> None:
    require("accelerate")
    path = make_llama(
        tmp_path / "models" / "llama-bf16", num_hidden_layers=4, dtype=torch.bfloat16, seed=16
    )
    entries = read_header(path / "model.safetensors").entries
    outside = sum(e.end - e.begin for n, e in entries.items() if ".layers." not in n)
    layer = (held_bytes([read_header(path / "model.safetensors")]) - outside) // 4
    limit = outside + 2 * layer + layer // 2
    spread = registry_of(
        tmp_path / "models", max_model_bytes=limit, offload_dir=tmp_path / "offload"
    ).load("llama-bf16")
    hf = spread.model.model  # type: ignore[attr-defined]
    layers = [hf.hf_device_map[f"model.layers.{i}"] for i in range(4)]
    assert layers == ["cpu", "cpu", "disk", "disk"], hf.hf_device_map
    # The weights stay bf16, in memory and on disk (read in as stored each pass).
    assert hf.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
    assert hf.model.layers[3].mlp.up_proj.weight.device.type == "meta"
    outputs: dict[str, torch.dtype] = {}

    def keep(name: str) -> object:
        def hook(_m: nn.Module, _i: object, out: torch.Tensor) -> None:
            outputs[name] = out.dtype

        return hook

    for i in (0, 3):  # one layer in memory, one read from disk
        hf.model.layers[i].mlp.register_forward_hook(keep(f"mlp {i}"))
        hf.model.layers[i].input_layernorm.register_forward_hook(keep(f"norm {i}"))
    maps = spread.encode(TEXT)
    assert set(outputs.values()) == {torch.float32}, outputs
    assert hf.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
    in_memory = registry_of(tmp_path / "models").load("llama-bf16")
    assert isinstance(in_memory, Decoder) and in_memory.model.__class__.__name__ == "Llama"
    ids = spread.tokenize(TEXT).input_ids
    for ours, held, float32 in zip(
        maps.layer_attentions,
        in_memory.encode(TEXT).layer_attentions,
        eager_float32(path, ids),
        strict=True,
    ):
        torch.testing.assert_close(ours, held, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours, float32, atol=1e-5, rtol=0)


def spread_registry(tmp_path: Path) -> ModelRegistry:
    """A 4-layer Llama whose limit keeps about half its layers in memory."""
    require("accelerate")
    path = make_llama(tmp_path / "models" / "llama", num_hidden_layers=4, seed=17)
    entries = read_header(path / "model.safetensors").entries
    outside = sum(e.end - e.begin for n, e in entries.items() if ".layers." not in n)
    layer = (sum(e.end - e.begin for e in entries.values()) - outside) // 4
    limit = outside + 2 * layer + layer // 2
    return registry_of(tmp_path / "models", max_model_bytes=limit, offload_dir=tmp_path / "off")


def test_a_spread_load_reports_each_layer_read(tmp_path: Path) -> None:
    """transformers reads a spread model while it loads: ``load`` progress per layer (the
    4 layers, then the embeddings, norm and head), once."""
    registry = spread_registry(tmp_path)
    seen: list[tuple[str, int, int]] = []
    with reporting(lambda *event: seen.append(event)):
        model = registry.load("llama")
    assert model.model.model.hf_device_map  # type: ignore[attr-defined]
    assert seen == [("load", n, 5) for n in range(1, 6)]


def test_a_cancelled_spread_load_stops_and_is_not_a_failure(tmp_path: Path) -> None:
    registry = spread_registry(tmp_path)
    gone = threading.Event()
    gone.set()
    with reporting(cancelled=gone), pytest.raises(Cancelled):
        registry.load("llama")
    assert registry.entry("llama").reason is None
    assert registry.load("llama").encode(TEXT).layer_attentions


def test_only_layers_computing_on_the_cpu_are_upcast(tmp_path: Path) -> None:
    """On a map with a GPU, accelerate runs the layers it keeps in CPU memory or on disk
    on the GPU (its fast 16-bit arithmetic): they stay 16-bit; on a CPU-only map the same
    layers compute in float32.  ``meta`` stands in for the GPU (no CUDA here): the choice
    reads only the type of each module's execution device."""
    transformers = require("transformers")
    accelerate = require("accelerate")
    from attention_core.models.checkpoints.hooked_float32 import (
        WRAPPED,
        compute_hooked_in_float32,
        computing_on_cpu,
    )
    from attention_core.models.checkpoints.weight_dtype import SIXTEEN_BIT

    path = make_llama(tmp_path / "llama", num_hidden_layers=4, dtype=torch.bfloat16, seed=18)
    device_map = {
        "model.embed_tokens": "cpu",
        "model.rotary_emb": "cpu",
        "model.layers.0": "cpu",
        "model.layers.1": "cpu",
        "model.layers.2": "disk",
        "model.layers.3": "disk",
        "model.norm": "cpu",
        "lm_head": "cpu",
    }

    def dispatched(main_device: str | None) -> nn.Module:
        model: nn.Module = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.bfloat16, local_files_only=True
        )
        accelerate.dispatch_model(
            model, device_map, main_device=main_device, offload_dir=str(tmp_path / "off")
        )
        compute_hooked_in_float32(model)
        return model

    def sixteen_bit(model: nn.Module) -> list[str]:
        return [
            name
            for name, m in model.named_modules()
            if not isinstance(m, nn.Embedding)
            and any(p.dtype in SIXTEEN_BIT for p in m._parameters.values() if p is not None)
        ]

    cpu_only = dispatched(None)
    wrapped = [n for n, m in cpu_only.named_modules() if getattr(m, WRAPPED, False)]
    assert wrapped == sixteen_bit(cpu_only) and "model.layers.3.mlp.up_proj" in wrapped
    with_gpu = dispatched("meta")
    assert computing_on_cpu(with_gpu) == []
    assert not any(getattr(m, WRAPPED, False) for m in with_gpu.modules())
    embedding = with_gpu.get_submodule("model.embed_tokens")
    assert not embedding._forward_hooks  # its rows come out as stored
