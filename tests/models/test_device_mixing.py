"""The GPU path mixes no devices: on a GPU (``ATTENTION_VIZ_DEVICE=cuda``) an op given a
GPU tensor and a CPU one fails, and CI has no GPU to show it.  ``DeviceTags`` plays the
GPU on the CPU (see ``device_tags``): the model's weights are tagged as on the device,
and every op that would mix a device tensor with a CPU one is recorded.

Each model answers, past the full-maps budget (the long path), what the GPU benchmark
asks: the pooled overview of every head, one head's region at full resolution, and
value-weighted maps; then one head step by step.  A hand-written Llama (GQA, the
benchmark's family), GPT-2, and Qwen3 through transformers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import attention_core.models.text.decoder as decoder_module
import attention_core.models.text.text_model_base as text_model_module
from app.attention_answer import attention_answer
from app.head_answer import head_answer
from app.model_registry import load
from app.schemas.model import ModelAttentionRequest, ModelHeadRequest
from app.settings import Settings
from tests.models.checkpoints import make_gpt2, make_llama
from tests.models.device_tags import DEVICE, DeviceTags
from tests.models.hf_checkpoints import make_hf
from tests.models.registries import registry_of
from tests.requires import require

CONTEXT = 1024
TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 40)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers")
    root = tmp_path_factory.mktemp("device-mixing")
    make_llama(root / "llama", max_position_embeddings=CONTEXT, seed=4)
    make_gpt2(root / "gpt2", n_positions=CONTEXT, seed=3)
    make_hf(root / "qwen3", "tiny-qwen3", seed=5, max_position_embeddings=CONTEXT)
    return root


@pytest.fixture
def tags(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeviceTags]:
    """The played GPU; ``running_on`` (the models' ``with device:``) made to say so."""
    tags = DeviceTags()

    def running_on(device: torch.device) -> contextlib.AbstractContextManager[None]:
        played = device == DEVICE and device.index == 0
        return tags.on_device() if played else contextlib.nullcontext()

    for module in (text_model_module, decoder_module):
        monkeypatch.setattr(module, "running_on", running_on)
    yield tags


def ask(root: Path, name: str, tags: DeviceTags, bodies: list[dict[str, Any]]) -> list[Any]:
    settings = Settings(
        models=str(root), hf_cache=False, model_full_maps_bytes=1, model_max_answer_cells=2**30
    )
    registry = registry_of(root, device=DEVICE, max_tokens=CONTEXT)
    entry, model = load(registry, name)
    assert model.device == DEVICE
    answers = []
    with tags:
        tags.tag(*model.torch_module.parameters(), *model.torch_module.buffers())
        for body in bodies:
            request = ModelAttentionRequest.model_validate({"model": name, "text": TEXT, **body})
            answers.append(attention_answer(request, registry, settings))
        head = ModelHeadRequest.model_validate(
            {"model": name, "text": TEXT, "layer": 2, "head": 2, "rows": [500, 520]}
        )
        answers.append(head_answer(model, entry.name, head, None, settings))
    return answers


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen3"])
def test_the_long_path_mixes_no_devices(root: Path, name: str, tags: DeviceTags) -> None:
    n = 520
    overview, zoom, weighted, head = ask(
        root,
        name,
        tags,
        [
            {"pool": 16, "format": "compact"},
            {"layers": [1], "heads": [1], "rows": [n - 64, n], "cols": [n - 64, n]},
            {"pool": 16, "measure": "value_norm"},
        ],
    )
    assert overview.maps_path == "long" and len(overview.tokens) > n
    assert zoom.attentions and weighted.attentions and head is not None
    assert tags.mixed == [], "\n".join(dict.fromkeys(tags.mixed))


def test_the_played_device_catches_a_mix(tags: DeviceTags) -> None:
    """The check itself: a device tensor beside a CPU one is caught, one made on the
    device or moved there is not, and a device tensor's numpy view is caught."""
    weight = torch.ones(3, 4)
    with tags:
        tags.tag(weight)
        weight + torch.ones(3, 4)
        weight + torch.ones(3, 4, device=weight.device)
        with tags.on_device():
            weight + torch.zeros(3, 4)
        weight + torch.ones(3, 4).to(weight.device)
        weight * torch.tensor(2.0)  # a 0-dim CPU tensor is a scalar on any device
        weight.cpu().numpy()
        weight.numpy()
    assert len(tags.mixed) == 2, tags.mixed
    assert tags.mixed[0].startswith("add") and tags.mixed[1].startswith("numpy")
