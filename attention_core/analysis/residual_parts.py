"""What wrote to the residual stream before a layer, at a few positions, as components.

For a pre-norm decoder a layer's input is the sum of the embedding (token
and, where the family has them, position embeddings), each earlier head's
output (its context through its slice of the output projection), each
earlier attention output bias and each earlier MLP's output (found as what
the block added beyond its attention).  One forward pass, stopped at the
layer's block, gives them: the block inputs and each layer's context at the
positions asked for.

OLMo 2 (and the Gemma 2/3 kind) normalize the attention's output before adding
it (``post_attention_layernorm``): frozen at that output's value, each head's
share of the sum goes through it (``residual_writes``).

BERT is post-norm: each sublayer's sum goes through a LayerNorm, frozen at
the forward's values, so every component so far (and the norms' shifts, kept
with the biases) is carried through it; the components are those entering
the layer.

``Parts``: ``parts`` (N, P, C), the names of the N components, ``bias``
(P, C) the constant part (no component's), and the layer's whole input (T, C).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..models.families.bert import Encoder
from ..models.maps.context_pass import context_only
from ..progress import StopForward
from .access import DecoderHeadModel
from .frozen_norm import frozen


@dataclass(frozen=True)
class Parts:
    names: tuple[str, ...]
    parts: torch.Tensor  # (N, P, C)
    bias: torch.Tensor  # (P, C)
    layer_input: torch.Tensor  # (T, C): the layer's input at every position


# transformers model types whose blocks add post_attention_layernorm(attention output).
POST_NORMED = frozenset({"olmo2", "gemma2", "gemma3_text"})


def post_norm(heads: DecoderHeadModel, layer: int) -> nn.Module | None:
    """The norm ``layer``'s attention output goes through before the residual, if any."""
    config = getattr(heads.module, "config", None)
    if getattr(config, "model_type", None) not in POST_NORMED:
        return None
    return heads.blocks[layer].get_submodule("post_attention_layernorm")


def residual_writes(
    heads: DecoderHeadModel, layer: int, outs: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head's output (H, P, C) and the output bias (C,) as written to the residual
    stream: through the post-attention norm frozen at their sum, where the family has one;
    -> (H, P, C), (P, C)."""
    bias = bias.expand(outs.shape[1], outs.shape[2])
    norm = post_norm(heads, layer)
    if norm is None:
        return outs, bias
    held = frozen(norm, outs.sum(0) + bias)
    return held.apply(outs), held.apply(bias) + held.shift


class _Stop(StopForward):
    """Raised at the asked layer's block: the layers above it are not needed."""


def _head_outputs(context: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """context (P, H·D), W (H, D, C) -> each head's output (H, P, C)."""
    H, D, _ = W.shape
    return torch.einsum("phd,hdc->hpc", context.view(-1, H, D), W)


def decoder_parts(
    heads: DecoderHeadModel, ids: Sequence[int], layer: int, positions: torch.Tensor
) -> Parts:
    """The components of ``layer``'s input (0-based) at ``positions`` (see the module doc)."""
    inputs: dict[int, torch.Tensor] = {}
    contexts: dict[int, torch.Tensor] = {}

    def keep_context(n: int, context: torch.Tensor) -> torch.Tensor:
        contexts[n] = context[0, positions].detach().float()
        return context

    def keep_input(n: int, x: torch.Tensor) -> torch.Tensor:
        inputs[n] = x[0].detach().float()
        if n == layer:
            raise _Stop
        return x

    with torch.no_grad(), heads.editing(keep_context, keep_input):
        try:
            heads.decoder.model(torch.tensor([list(ids)]), num_logits=0, blocked=context_only())
        except _Stop:
            pass
    names = ["embedding"]
    parts = [inputs[0][positions][None]]
    bias = torch.zeros_like(parts[0][0])
    for n in range(layer):
        outs = _head_outputs(contexts[n], heads.out_weights(n).float())  # (H, P, C)
        outs, b = residual_writes(heads, n, outs, output_bias(heads.projections[n], outs.shape[-1]))
        attention = outs.sum(0) + b
        mlp = inputs[n + 1][positions] - inputs[n][positions] - attention
        names += [f"L{n + 1} H{h + 1}" for h in range(heads.num_heads)] + [f"L{n + 1} MLP"]
        parts += [outs, mlp[None]]
        bias = bias + b
    return Parts(tuple(names), torch.cat(parts), bias, inputs[layer])


def output_bias(module: nn.Module, width: int) -> torch.Tensor:
    b = getattr(module, "bias", None)
    return b.detach().float() if isinstance(b, torch.Tensor) else torch.zeros(width)


class _LayerNorm(nn.Module):
    """BERT's ``F.layer_norm`` with its weights, as a module ``frozen_norm`` can read."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = weight, bias, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)


def encoder_parts(
    encoder: Encoder, ids: Sequence[int], layer: int, positions: torch.Tensor
) -> Parts:
    """BERT's components of ``layer``'s input, carried through each frozen LayerNorm."""
    contexts: dict[int, torch.Tensor] = {}

    def keep_context(n: int, context: torch.Tensor) -> torch.Tensor:
        contexts[n] = context[positions].detach().float()
        return context

    tensor = torch.tensor(list(ids))
    with torch.no_grad():
        _, hidden, _ = encoder.forward_layers(
            tensor,
            torch.zeros_like(tensor),
            edit_context=keep_context,
            blocked=context_only(),  # no map: each layer's context block by block
        )
        c = encoder.config
        H, D, eps = c.num_attention_heads, c.head_dim, c.layer_norm_eps
        names = ["embedding"]
        parts = hidden[0][positions][None].float()
        bias = torch.zeros_like(parts[0])
        for n in range(layer):
            w = encoder.layers[n]
            W = w.W_out.T.reshape(H, D, -1).float()
            outs = _head_outputs(contexts[n], W)
            pre = hidden[n][positions] + outs.sum(0) + w.b_out
            norm1 = frozen(_LayerNorm(w.attn_norm_weight, w.attn_norm_bias, eps), pre)
            parts = norm1.apply(torch.cat([parts, outs]))
            bias = norm1.apply(bias + w.b_out) + norm1.shift
            a = parts.sum(0) + bias
            mlp = F.linear(encoder._act(F.linear(a, w.W_up, w.b_up)), w.W_down, w.b_down)
            norm2 = frozen(_LayerNorm(w.out_norm_weight, w.out_norm_bias, eps), a + mlp)
            parts = norm2.apply(torch.cat([parts, mlp[None]]))
            bias = norm2.apply(bias) + norm2.shift
            names += [f"L{n + 1} H{h + 1}" for h in range(H)] + [f"L{n + 1} MLP"]
    return Parts(tuple(names), parts, bias, hidden[layer].float())
