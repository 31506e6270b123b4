"""16-bit weights held as stored, run in float32; models over the limit spread by accelerate.

Oracles: transformers' eager attention (``output_attentions=True``) on the same
checkpoint, in bfloat16 (within bfloat16's tolerance) and in float32; the same
checkpoint held in float32 (``ATTENTION_VIZ_DTYPE=float32``, the old path); the
same model in memory for the one spread over memory and disk.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from attention_core.models import Decoder, read_header
from attention_core.models.base.contract import KeptStack, PassOptions
from attention_core.models.checkpoints.weight_dtype import held_bytes, size_text
from attention_core.models.maps.map_grid import MapQuery
from attention_core.models.maps.pooling import Region
from attention_core.progress import Cancelled, reporting
from tests.models.checkpoints import make_gpt2, make_llama
from tests.models.registries import registry_of
from tests.requires import require

TEXT = "The bank approved the loan, and the river bank was muddy."


def stored_bytes(directory: Path) -> int:
    return held_bytes([read_header(directory / "model.safetensors")])


def eager(path: Path, ids: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    transformers = require("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, attn_implementation="eager", dtype=dtype, local_files_only=True
    ).eval()
    with torch.inference_mode():
        out = model(torch.tensor([ids]), output_attentions=True)
    return tuple(a[0].float() for a in out.attentions)


def rss() -> int:
    """This process's resident bytes now."""
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_a_bf16_checkpoint_is_held_in_bf16_and_its_maps_are_eager(
    family: str, tmp_path: Path
) -> None:
    make = make_llama if family == "llama" else make_gpt2
    path = make(tmp_path / "models" / f"{family}-bf16", dtype=torch.bfloat16, seed=11)
    model = registry_of(tmp_path / "models").load(f"{family}-bf16")
    assert isinstance(model, Decoder)
    held = {p.dtype for p in model.model.parameters()}  # type: ignore[attr-defined]
    assert held == {torch.bfloat16}
    maps = model.encode(TEXT)
    assert {m.dtype for m in maps.layer_attentions} == {torch.float32}
    ids = model.tokenize(TEXT).input_ids
    in_bf16, in_float32 = eager(path, ids, torch.bfloat16), eager(path, ids, torch.float32)
    # Each layer computed in float32 from the bf16 weights: float32 eager's maps, and the
    # maps of the same checkpoint upcast whole at load (the old path), to float32 rounding.
    upcast = registry_of(tmp_path / "models", dtype=torch.float32).load(f"{family}-bf16")
    assert {p.dtype for p in upcast.model.parameters()} == {torch.float32}  # type: ignore[attr-defined]
    old = upcast.encode(TEXT).layer_attentions
    for ours, bf16, float32, before in zip(
        maps.layer_attentions, in_bf16, in_float32, old, strict=True
    ):
        torch.testing.assert_close(ours, float32, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours, before, atol=1e-6, rtol=0)
        # Within bf16's tolerance of transformers' bf16 pass: no farther from it than its
        # own rounding takes it from float32 (these checkpoints' weights are 20x the usual
        # scale, peaked maps: a few hundredths).
        rounding = float((bf16 - float32).abs().max())
        assert rounding > 0  # transformers did compute in bf16
        torch.testing.assert_close(ours, bf16, atol=rounding + 1e-5, rtol=0)


def test_a_bf16_model_takes_its_stored_bytes(tmp_path: Path) -> None:
    """Resident growth after loading and one forward pass: at most about the stored bytes,
    where upcasting at load would take twice them; the parameters are the stored bytes."""
    make_llama(
        tmp_path / "models" / "wide",
        dtype=torch.bfloat16,
        hidden_size=512,
        num_hidden_layers=12,
        num_attention_heads=8,
        num_key_value_heads=8,
        initializer_range=0.02,
    )
    stored = stored_bytes(tmp_path / "models" / "wide")
    assert stored > 60e6  # big enough that the runtime's own allocations are noise
    registry = registry_of(tmp_path / "models")
    (entry,) = registry.entries()
    assert (entry.dtype, entry.held_bytes) == ("bfloat16", stored)
    before = rss()
    model = registry.load("wide")
    model.encode(TEXT)
    grown = rss() - before
    # (Float32 copies would take 2x; the lower end is not measured: memory this process
    # freed while making the checkpoint is reused without growing.)
    assert grown < 1.35 * stored, (grown, stored)
    module = model.model  # type: ignore[attr-defined]
    assert sum(p.numel() * p.element_size() for p in module.parameters()) == stored


def test_a_model_over_the_limit_is_listed_with_how_it_runs(tmp_path: Path) -> None:
    path = make_llama(tmp_path / "models" / "llama", num_hidden_layers=4, seed=12)
    headers = [read_header(path / "model.safetensors")]
    layers = held_bytes(headers) - _outside_layers(path)  # the 4 layers' bytes
    half = _outside_layers(path) + layers // 2
    (entry,) = registry_of(tmp_path / "models", max_model_bytes=half).entries()
    assert entry.supported and entry.backend == "transformers" and entry.family == "llama"
    assert entry.placement is not None
    assert (entry.placement.layers_in_memory, entry.placement.layers_on_disk) == (2, 2)
    assert entry.held_bytes == held_bytes(headers)
    text = entry.placement.describe()
    on_disk = size_text(layers // 2)
    assert f"keeps about 2 layers in memory and reads 2 from disk ({on_disk})" in text
    assert "float32 weights, transformers backend" in text
    refused = registry_of(tmp_path / "models", max_model_bytes=half, offload=False).entries()
    assert refused[0].reason == (
        f"the weights take {held_bytes(headers):,} bytes once loaded (float32, as stored); the "
        f"limit is {half:,} bytes (ATTENTION_VIZ_MAX_MODEL_BYTES)"
    )


def _outside_layers(path: Path) -> int:
    """The bytes of the tensors in no layer (embeddings, final norm, head)."""
    entries = read_header(path / "model.safetensors").entries
    return sum(e.end - e.begin for n, e in entries.items() if ".layers." not in n)


def test_half_the_layers_on_disk_give_the_maps_of_the_model_in_memory(tmp_path: Path) -> None:
    require("accelerate")
    path = make_llama(tmp_path / "models" / "llama", num_hidden_layers=4, seed=12)
    layer = (stored_bytes(path) - _outside_layers(path)) // 4
    limit = _outside_layers(path) + 2 * layer + layer // 2
    offload = tmp_path / "offload"
    spread = registry_of(tmp_path / "models", max_model_bytes=limit, offload_dir=offload)
    model = spread.load("llama")
    device_map = model.model.model.hf_device_map  # type: ignore[attr-defined]
    layers = [device_map[f"model.layers.{i}"] for i in range(4)]
    assert layers == ["cpu", "cpu", "disk", "disk"], device_map
    # Not in memory: read from the checkpoint's own safetensors as each forward reaches them.
    hf = model.model.model  # type: ignore[attr-defined]
    assert hf.model.layers[2].self_attn.q_proj.weight.device.type == "meta"
    assert hf.model.layers[1].self_attn.q_proj.weight.device.type == "cpu"
    in_memory = registry_of(tmp_path / "models").load("llama")
    assert isinstance(in_memory, Decoder) and in_memory.model.__class__.__name__ == "Llama"
    ours, theirs = model.encode(TEXT), in_memory.encode(TEXT)
    for a, b in zip(ours.layer_attentions, theirs.layer_attentions, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    ids = model.tokenize(TEXT).input_ids
    for a, b in zip(ours.layer_attentions, eager(path, ids, torch.float32), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def kept_stack(model: Decoder, query: MapQuery) -> KeptStack:
    """The model's one pass (the contract), ``query`` gathered during it."""
    return model.forward_stacks(TEXT, options=PassOptions(view=lambda *_: query)).stack()


def test_the_long_path_of_a_bf16_model_is_the_float32_path(tmp_path: Path) -> None:
    """Kept q and k float32, pooled maps and one head at full resolution: as the checkpoint
    upcast whole at load gives them."""
    make_llama(tmp_path / "models" / "llama-bf16", dtype=torch.bfloat16, seed=13)
    held = registry_of(tmp_path / "models").load("llama-bf16")
    upcast = registry_of(tmp_path / "models", dtype=torch.float32).load("llama-bf16")
    assert isinstance(held, Decoder) and isinstance(upcast, Decoder)
    T = len(held.tokenize(TEXT))
    spec = MapQuery(None, Region(0, T, 0, T), (4, 4), None)
    ours, before = kept_stack(held, spec), kept_stack(upcast, spec)
    for layer in range(2):
        assert ours.layers[layer].query.dtype == torch.float32
        torch.testing.assert_close(
            ours.grids[layer].heads, before.grids[layer].heads, atol=1e-6, rtol=0
        )
        one = MapQuery(None, Region(0, T, 0, T), (1, 1), (1,), average=False)
        full = held.encode(TEXT).layer_attentions[layer][[1]]
        torch.testing.assert_close(ours.grid(layer, one).heads, full, atol=1e-6, rtol=0)


def test_loading_reads_the_weights_in_layer_by_layer(tmp_path: Path) -> None:
    """``load`` progress: each of the 2 layers, then the embeddings, norm and head."""
    make_llama(tmp_path / "models" / "llama-bf16", dtype=torch.bfloat16, seed=14)
    seen: list[tuple[str, int, int]] = []
    with reporting(lambda *event: seen.append(event)):
        registry_of(tmp_path / "models").load("llama-bf16")
    assert seen == [("load", 1, 3), ("load", 2, 3), ("load", 3, 3)]


def test_a_load_cancelled_by_its_request_is_not_remembered_as_a_failure(tmp_path: Path) -> None:
    """A client that leaves while its model loads stops the load; the model stays listed
    supported and the next request loads it (it once was refused as unreadable for good)."""
    make_llama(tmp_path / "models" / "llama-bf16", dtype=torch.bfloat16, seed=15)
    registry = registry_of(tmp_path / "models")
    gone = threading.Event()
    gone.set()
    with reporting(cancelled=gone), pytest.raises(Cancelled):
        registry.load("llama-bf16")
    assert registry.entry("llama-bf16").reason is None
    assert isinstance(registry.load("llama-bf16"), Decoder)
