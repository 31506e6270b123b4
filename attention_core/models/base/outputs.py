"""What a model's forward pass returns, in Hugging Face's layout (batch first)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...attention import AttentionSteps
from ...errors import SpecError


@dataclass(frozen=True)
class AttentionInputs:
    """What attention read in one layer (0-based ``layer``): its input ``x`` (after the
    layer's norm) and ``q``, ``k``, ``v`` exactly as attention used them (so after RoPE
    where the family has it).  ``LayerTrace`` holds them for a whole layer, ``HeadTrace``
    for one head."""

    layer: int
    x: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


@dataclass(frozen=True)
class LayerTrace(AttentionInputs):
    """Every tensor one attention layer computed, for the step-by-step view of a real head.

    Shapes (B batch, T new positions, S = cached + new positions, C width,
    H query heads, H_kv key/value heads, D head width): x (B, T, C); q (B, H, T, D),
    k and v (B, H_kv, S, D); ``q_unrotated``/``k_unrotated`` are the projections
    before RoPE (None without RoPE); ``qk_norm``: they are after the family's per-head
    q/k norms (Qwen3, OLMo 2, Gemma 3); ``steps`` holds (B, H, T, S) scores and weights.
    """

    steps: AttentionSteps
    q_unrotated: torch.Tensor | None = None
    k_unrotated: torch.Tensor | None = None
    qk_norm: bool = False


@dataclass(frozen=True)
class DecoderOutput:
    """``logits`` (B, T_kept, vocab) for the last ``T_kept`` positions asked for.

    ``attentions``: one (B, H, T, S) tensor per layer, rows sum to 1, empty unless
    asked for.  ``hidden_states``: L + 1 tensors (B, T, C) when asked for, as
    transformers gives them: the embeddings, each block's output, and the last
    block's output after the final norm in place of the raw one.
    """

    logits: torch.Tensor
    attentions: tuple[torch.Tensor, ...] = ()
    hidden_states: tuple[torch.Tensor, ...] = ()
    trace: LayerTrace | None = None


def check_layer(layer: int, count: int, owner: str = "this model") -> None:
    """A ``SpecError`` on ``layer`` unless 0 <= ``layer`` < ``count`` (said 1-based, as the
    API counts); ``owner`` names what has the ``count`` layers."""
    if not 0 <= layer < count:
        raise SpecError(
            f"layer {layer + 1} does not exist; {owner} has layers 1 to {count}",
            field="layer",
        )
