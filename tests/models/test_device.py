"""ATTENTION_VIZ_DEVICE: 'cpu' by default; 'cuda' refused at start-up without a GPU; the
walk that moves a model's weights and brings results back to the CPU (checked on 'meta',
a device every torch has)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from app.main import create_app
from app.settings import Settings
from attention_core.attention import attention_with_steps
from attention_core.models import Encoder
from attention_core.models.base.device import check_device, move, to_cpu
from attention_core.models.base.outputs import LayerTrace

META = torch.device("meta")


def test_cpu_is_the_default_and_other_names_are_refused() -> None:
    assert Settings().device == "cpu" and check_device("cpu") == torch.device("cpu")
    with pytest.raises(ValidationError, match="'cpu' or 'cuda'"):
        Settings(device="tpu")
    with pytest.raises(ValueError, match="not one of cpu, cuda"):
        check_device("tpu")


def test_cuda_without_a_gpu_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="ATTENTION_VIZ_DEVICE is 'cuda' but this torch sees no"):
        create_app(Settings(device="cuda", hf_cache=False))


def trace() -> LayerTrace:
    q, k, v = torch.rand(3, 1, 2, 5, 4)  # each (B, H, T, D)
    steps = attention_with_steps(q, k, v)
    return LayerTrace(layer=0, x=torch.rand(1, 5, 8), q=q, k=k, v=v, steps=steps)


def test_every_tensor_of_a_nested_frozen_result_moves() -> None:
    cpu = trace()
    assert to_cpu(cpu) is cpu  # already on the CPU: the same objects
    moved = move(cpu, META)
    for name in ("x", "q", "k", "v"):
        assert getattr(moved, name).device == META
    for step in dataclasses.fields(moved.steps):
        value = getattr(moved.steps, step.name)
        if isinstance(value, torch.Tensor):
            assert value.device == META, step.name
    assert moved.q_unrotated is None and moved.layer == 0
    assert move((cpu.x, [cpu.q], {"k": cpu.k}), META)[2]["k"].device == META


def test_an_encoder_moves_every_weight(encoder: Encoder) -> None:
    original = (encoder.embeddings, encoder.layers)
    try:
        encoder.to_device(META)
        assert encoder.device == META
        tensors = [
            getattr(part, f.name)
            for part in (encoder.embeddings, *encoder.layers)
            for f in dataclasses.fields(part)
        ]
        assert tensors and all(t.device == META for t in tensors if isinstance(t, torch.Tensor))
    finally:
        encoder.embeddings, encoder.layers = original
        encoder.device = torch.device("cpu")


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-roberta"])
def test_a_transformers_backed_model_moves_every_weight(
    name: str, hf_checkpoints: Callable[[str], Path]
) -> None:
    """The transformers backend's decoder (``Decoder`` over ``TransformersLM``) and encoder."""
    from attention_core.models.registry.model_registry import ModelRegistry

    registry = ModelRegistry(
        include_package=False, builtin_dir=None, env_paths=[hf_checkpoints(name)]
    )
    model = registry.load(name)
    model.to_device(META)
    inner = model.model.model  # type: ignore[attr-defined]
    assert all(p.device == META for p in inner.parameters())
