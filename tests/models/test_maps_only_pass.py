"""A maps-only forward pass (``maps_only``, what the contract's pass asks when no hidden
state is wanted) skips what no map reads: the last layer's MLP, the final norm, the head.

Oracles: the same model's whole forward pass (the maps equal exactly: the skipped
parts come after every attention), FLOPs counted by torch (the difference is
the last MLP's matmuls, nothing else), and forward hooks on the skipped modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from attention_core.models import GPT2, Llama
from attention_core.models.base.contract import PassOptions
from attention_core.models.text.decoder import Decoder
from tests.models.checkpoints import make_llama
from tests.models.tiny_decoders import counted_forward, tiny_gpt2, tiny_llama

T, C, INNER, V = 24, 32, 64, 500


def gpt2() -> GPT2:
    return tiny_gpt2(V, C, INNER)


def llama() -> Llama:
    return tiny_llama(V, C, INNER)


# The last MLP's matmuls: Llama's gate, up and down; GPT-2's c_fc and c_proj.
MLP_FLOPS = {"gpt2": 2 * 2 * T * C * INNER, "llama": 3 * 2 * T * C * INNER}
BUILD = {"gpt2": gpt2, "llama": llama}


def forward(model: nn.Module, **options: object) -> tuple[Any, int]:
    torch.manual_seed(0)
    return counted_forward(model, torch.randint(0, V, (1, T)), **options)


def calls(modules: dict[str, nn.Module]) -> dict[str, int]:
    """A live count of each module's forward calls."""
    counts = dict.fromkeys(modules, 0)
    for name, module in modules.items():

        def hook(*_: object, name: str = name) -> None:
            counts[name] += 1

        module.register_forward_hook(hook)
    return counts


def skipped_modules(model: GPT2 | Llama) -> dict[str, nn.Module]:
    last = model.blocks[-1]
    first = model.blocks[0]
    return {
        "last mlp": last.get_submodule("mlp"),
        "first mlp": first.get_submodule("mlp"),
        "final norm": model.final_norm,
        "head": model.lm_head,
    }


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_maps_only_pass_skips_the_last_mlp_and_keeps_every_map(family: str) -> None:
    model = BUILD[family]()
    counts = calls(skipped_modules(model))
    whole, whole_flops = forward(model, num_logits=0)
    assert counts == {"last mlp": 1, "first mlp": 1, "final norm": 1, "head": 0}
    only, only_flops = forward(model, maps_only=True)
    assert counts == {"last mlp": 1, "first mlp": 2, "final norm": 1, "head": 0}
    assert whole_flops - only_flops == MLP_FLOPS[family]
    assert len(only.attentions) == len(whole.attentions) == 2  # type: ignore[attr-defined]
    for a, b in zip(only.attentions, whole.attentions, strict=True):  # type: ignore[attr-defined]
        assert torch.equal(a, b)
    assert only.logits.shape == (1, 0, V)  # type: ignore[attr-defined]
    assert only.hidden_states == ()  # type: ignore[attr-defined]


def test_a_maps_only_pass_has_no_hidden_states_to_give() -> None:
    with pytest.raises(ValueError, match="no hidden states"):
        forward(llama(), maps_only=True, output_hidden_states=True)


def test_the_contract_pass_skips_the_last_mlp_unless_hidden_states_are_kept(
    tmp_path: Path,
) -> None:
    """``forward_stacks`` (every map answer's pass): maps-only without hidden states;
    with them, the last MLP runs and its output (final-normed) is the last state."""
    path = make_llama(tmp_path / "llama", num_hidden_layers=2, seed=31)
    decoder = Decoder.from_dir(path, Llama.from_pretrained, "llama")
    model = decoder.model
    assert isinstance(model, Llama)
    counts = calls(skipped_modules(model))
    text = "The bank approved the loan."
    maps_only = decoder.pass_of(decoder.tokenize(text), PassOptions()).stack()
    assert counts["last mlp"] == 0 and counts["final norm"] == 0
    assert maps_only.hidden_states == ()
    kept = decoder.pass_of(decoder.tokenize(text), PassOptions(hidden_states=True)).stack()
    assert counts["last mlp"] == 1 and counts["final norm"] == 1
    assert len(kept.hidden_states) == 3
    for a, b in zip(maps_only.layers, kept.layers, strict=True):
        assert torch.equal(a.query, b.query) and torch.equal(a.key, b.key)
