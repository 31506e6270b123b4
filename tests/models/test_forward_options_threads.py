"""Two threads running one model at once, each forward with options of its own (a blocked
pass, a capture, an edit of the heads' outputs): each reaches only its own.  The options
travel with the call (an argument, a forward keyword; a pre-hook held for the call on a
shared module, acting on the calling thread's forward only), never through state another
thread could see."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch

from attention_core.analysis import head_model
from attention_core.attention import AttentionSteps
from attention_core.blocked_attention import AttentionCall
from attention_core.models import GPT2, Decoder
from attention_core.models.maps.context_pass import ContextPass
from tests.requires import require

require("transformers")

from attention_core.models.hf.language_model import TransformersLM  # noqa: E402
from attention_core.models.hf.text_models import load_transformers  # noqa: E402

IDS = torch.tensor([[1, 5, 17, 42, 9, 88, 23, 4, 61, 7, 30]])
ROUNDS = 15


class CountingPass(ContextPass):
    """A ``ContextPass`` that counts the attention calls handed to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def steps(
        self, layer: int | None, call: AttentionCall, module: object = None
    ) -> AttentionSteps:
        self.calls += 1
        return super().steps(layer, call, module)


# An interface family (the keyword reaches the attention through transformers' code) and
# an adapted one (the keyword reaches it from a pre-hook held for the call).
@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-bloom"])
def test_a_pass_and_a_capture_in_two_threads_reach_their_own_forward(
    name: str, hf_checkpoints: Callable[[str], Path]
) -> None:
    model = TransformersLM.load(hf_checkpoints(name), "decoder")
    layers = model.config.num_layers
    with torch.inference_mode():
        alone = model(IDS, output_attentions=True).attentions

    def with_maps(_: int) -> None:
        with torch.inference_mode():
            for _ in range(ROUNDS):
                maps = model(IDS, output_attentions=True).attentions
                assert len(maps) == layers  # no call of the other thread's forward
                for got, want in zip(maps, alone, strict=True):
                    torch.testing.assert_close(got, want, atol=0, rtol=0)

    def blocked(_: int) -> None:
        with torch.inference_mode():
            for _ in range(ROUNDS):
                pass_ = CountingPass()
                out = model(IDS, output_hidden_states=True, blocked=pass_)
                assert pass_.calls == layers  # its own layers, none of the other thread's
                assert out.attentions == ()

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(with_maps, 0), pool.submit(blocked, 1)]:
            future.result()


def _edited_and_clean(heads: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The final states of ``IDS`` with every head of layer 0 zeroed, and without."""
    with torch.inference_mode():
        edited = heads.run(IDS, edit=_zero_layer_0).hidden[-1]
        clean = heads.run(IDS).hidden[-1]
    return edited, clean


def _zero_layer_0(layer: int, context: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(context) if layer == 0 else context


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-qwen3"])
def test_an_edit_in_one_thread_leaves_the_other_thread_s_forward_alone(
    name: str, checkpoints: Path, hf_checkpoints: Callable[[str], Path]
) -> None:
    """Head ablation's hooks sit on shared output projections for one run: a thread running
    the same model without an edit at the same time gets the clean states."""
    if name == "tiny-gpt2":
        decoder = Decoder.from_dir(checkpoints / name, GPT2.from_pretrained, "gpt2")
    else:
        decoder = load_transformers(
            hf_checkpoints(name), name, 512, 1 << 24, kind="decoder", family="qwen3"
        )
    heads = head_model(decoder)
    edited, clean = _edited_and_clean(heads)
    assert (edited - clean).abs().max() > 1e-3  # the edit changes the answer

    def run(edit: bool) -> None:
        for _ in range(ROUNDS):
            with torch.inference_mode():
                got = heads.run(IDS, edit=_zero_layer_0 if edit else None).hidden[-1]
            torch.testing.assert_close(got, edited if edit else clean, atol=0, rtol=0)

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(run, True), pool.submit(run, False)]:
            future.result()
