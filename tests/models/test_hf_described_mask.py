"""A transformers-backed decoder's pass without full maps describes its causal mask
instead of building it (``hf.described_mask``): Llama- and Qwen3-shaped tiny random
checkpoints through the transformers backend, their maps against transformers' eager
``output_attentions=True``, each layer kept as a causal call with no mask, the GPU
overview's kernel (run here in Triton's interpreter) taking every layer, and no (T, T)
tensor at all at 4,096 tokens (a dispatch mode watches every op's outputs); then every
transformers decoder of the tests' checkpoints: its eager maps, and which layers are
described."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core.models.base.contract import PassOptions
from attention_core.models.hf.text_models import load_transformers
from attention_core.models.maps import gpu_pooled
from attention_core.models.maps.long_maps import LongPass
from attention_core.models.text.text_model_base import TextModelBase
from tests.models.checkpoints import eager_attentions, make_llama
from tests.models.hf_checkpoints import ALL_SPECS, LONG_TEXT, make_hf
from tests.models.test_long_maps import LargestOutput, max_pool_blocks, whole
from tests.requires import require

TEXT = " ".join(["the river bank was muddy and the money was in the bank"] * 17)
LENGTH = 400
LONG = 4096


def load(directory: Path, family: str) -> TextModelBase[Any]:
    model: TextModelBase[Any] = load_transformers(  # type: ignore[assignment]
        directory, family, LONG, 0, kind="decoder", family=family
    )
    return model


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require("transformers")
    root = tmp_path_factory.mktemp("described-mask")
    return {
        "llama": make_llama(root / "llama", max_position_embeddings=LENGTH, seed=4),
        "qwen3": make_hf(root / "qwen3", "tiny-qwen3", seed=5, max_position_embeddings=LENGTH),
    }


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def case(
    request: pytest.FixtureRequest, dirs: dict[str, Path]
) -> tuple[TextModelBase[Any], list[torch.Tensor]]:
    """One family's model through the transformers backend and transformers' eager maps
    of TEXT, (H, T, T) per layer."""
    family: str = request.param
    model = load(dirs[family], family)
    ids = tuple(model.tokenize(TEXT).input_ids)
    return model, [maps[0] for maps in eager_attentions(dirs[family], ids)]


@pytest.fixture
def interpreter() -> Iterator[None]:
    """The GPU overview's kernel on the CPU, in Triton's interpreter (tests/conftest.py
    sets TRITON_INTERPRET before Triton is imported)."""
    require("triton")
    assert os.environ.get("TRITON_INTERPRET") == "1"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gpu_pooled, "CPU_INTERPRETER", True)
        yield


def test_the_long_pass_keeps_causal_calls_and_equals_eager_maps(
    case: tuple[TextModelBase[Any], list[torch.Tensor]],
) -> None:
    model, want = case
    T = want[0].shape[-1]
    assert 280 <= T <= 340
    options = PassOptions(view=lambda *_: whole(T))  # full resolution: every map whole
    long = model.forward_stacks(TEXT, options=options).stack()
    for layer, maps in enumerate(want):
        kept = long.layers[layer]
        assert kept.mask is None and kept.causal  # described, never built
        torch.testing.assert_close(long.grids[layer].heads, maps, atol=1e-5, rtol=0)
        # A zoom afterwards, rebuilt from the kept q and k: one head's last rows.
        zoom = long.grid(layer, whole(T, heads=(1,), average=False))
        torch.testing.assert_close(zoom.heads[0, -40:], maps[1, -40:], atol=1e-5, rtol=0)


@pytest.mark.usefixtures("interpreter")
def test_the_gpu_overview_kernel_pools_every_layer(
    case: tuple[TextModelBase[Any], list[torch.Tensor]],
) -> None:
    model, want = case
    T = want[0].shape[-1]
    block = (-(-T // 9), -(-T // 9))
    ids = torch.tensor([model.tokenize(TEXT).input_ids])
    pass_ = LongPass(whole(T, block), 2, device_pooling=True)
    with torch.inference_mode():
        model.model(ids, num_logits=0, blocked=pass_)
    assert pass_.pooled_on_device == 2  # the kernel, not the blocked path, gathered both
    for layer, maps in enumerate(want):
        grid = pass_.grids[layer]
        torch.testing.assert_close(grid.heads, max_pool_blocks(maps, *block), atol=1e-5, rtol=0)
        assert grid.average is not None
        average = max_pool_blocks(maps.mean(0), *block)
        torch.testing.assert_close(grid.average, average, atol=1e-5, rtol=0)


def test_a_4096_token_pass_on_the_transformers_backend_makes_no_t_by_t_tensor(
    tmp_path: Path,
) -> None:
    require("transformers")
    directory = make_hf(tmp_path / "qwen3", "tiny-qwen3", seed=6, max_position_embeddings=LONG)
    model = load(directory, "qwen3")
    ids = torch.randint(3, 150, (1, LONG), generator=torch.Generator().manual_seed(0))
    pass_ = LongPass(whole(LONG, (64, 64)), 2)
    with torch.inference_mode(), LargestOutput() as watched:
        model.model(ids, num_logits=0, blocked=pass_)
    assert sorted(pass_.grids) == [0, 1]
    # Blocks of rows of every head (a quarter of one head's map here), and no mask: the
    # boolean (1, 1, T, T) one transformers would build has T × T elements.
    assert watched.largest < LONG * LONG // 2
    assert all(layer.mask is None and layer.causal for layer in pass_.kept())


DECODERS = sorted(name for name, spec in ALL_SPECS.items() if spec.decoder)
# The layers whose mask is described (a causal call, no mask): not a sliding window's
# shorter than the text (Gemma's first layers, Mistral's), nor the families run by an
# adapter over their own eager code (Bloom, Falcon, GIT, GPT-Neo, MPT), whose masks that
# code builds itself.
DESCRIBED = {
    "tiny-gemma2": [False, True],
    "tiny-gemma3": [False, True],
    "tiny-gpt-neox": [True, True],
    "tiny-olmo2": [True, True],
    "tiny-phi3": [True, True],
    "tiny-qwen3": [True, True],
}


@pytest.mark.parametrize("name", DECODERS)
def test_every_transformers_decoder_s_long_pass_equals_its_eager_maps(
    tmp_path: Path, name: str
) -> None:
    """Whatever a family does with its mask (sliding windows kept, adapters' own masks,
    soft-caps), the pass that describes plain causal masks gives its eager maps."""
    require("transformers")
    directory = make_hf(tmp_path / name, name, seed=7)
    model = load(directory, name)
    ids = model.tokenize(LONG_TEXT).input_ids
    T = len(ids)
    want = eager_attentions(directory, tuple(ids))
    pass_ = LongPass(whole(T), len(want))
    with torch.inference_mode():
        model.model(torch.tensor([ids]), num_logits=0, blocked=pass_)
    for layer, maps in enumerate(want):
        torch.testing.assert_close(pass_.grids[layer].heads, maps[0], atol=1e-5, rtol=0)
    described = [kept.causal and kept.mask is None for kept in pass_.kept()]
    assert described == DESCRIBED.get(name, [False, False])
