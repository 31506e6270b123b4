"""What wrote to an encoder-decoder's two residual streams, as components (Marian, BART).

An encoder-decoder has two residual streams: the encoder's over the source
(each layer: self-attention, then an MLP) and the decoder's over the target
(each layer: causal self-attention, cross-attention reading the encoder's
output, then an MLP).  Marian and BART are post-norm: each sublayer's output
is added to the stream and the sum goes through a LayerNorm.  With each norm
frozen at the forward's values (``frozen_norm``) every component so far is
carried through it, as for BERT (``residual_parts.encoder_parts``): the
embedding (token and position embeddings, scaled and normed as the family
does), each earlier head's output (its context through its slice of the
output projection), each earlier MLP's output (what its norm's input holds
beyond the stream it read), and the constant part: the output projections'
biases and the norms' shifts.

One forward pass (``seq2seq_heads.seq2seq_forward``, no map held) gives
them: forward pre-hooks keep each attention's input, each head's context and
each norm's input at the positions asked for (``access.editing``: the calling
thread's pass only).

Component names: ``embedding``, ``L1 H3`` (the stream's own self-attention,
layer 1 head 3), ``L1 cross H3`` (the decoder's cross-attention) and
``L1 MLP``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from ..errors import SpecError
from ..models.base.capabilities import StackName
from ..models.base.out_projections import head_slices
from ..models.hf.seq2seq import EncoderDecoder
from .access import editing
from .frozen_norm import frozen
from .residual_parts import Parts, output_bias
from .seq2seq_heads import Seq2SeqText, out_projection, seq2seq_forward

Stream = Literal["encoder", "decoder"]

# transformers model types whose layers are post-norm with these module names.
POST_NORM_TYPES = frozenset({"marian", "bart"})

# Each layer's sublayers in order: (the attention stack, None for the MLP; the norm after it).
SUBLAYERS: dict[Stream, tuple[tuple[StackName | None, str], ...]] = {
    "encoder": (("encoder", "self_attn_layer_norm"), (None, "final_layer_norm")),
    "decoder": (
        ("decoder", "self_attn_layer_norm"),
        ("cross", "encoder_attn_layer_norm"),
        (None, "final_layer_norm"),
    ),
}


def stream_of(stack: StackName) -> Stream:
    """The stream whose states a stack's queries read (cross-attention: the decoder's)."""
    return "encoder" if stack == "encoder" else "decoder"


def check_family(model: EncoderDecoder) -> None:
    """Only the post-norm kind (Marian, BART) is decomposed; others are refused with the
    reason."""
    if model.family not in POST_NORM_TYPES:
        raise SpecError(
            f"{model.name} is a {model.family} encoder-decoder: the decomposition and "
            f"attribution know the post-norm kind ({', '.join(sorted(POST_NORM_TYPES))}: "
            "each sublayer's sum through a LayerNorm, no score bias); for this model ask "
            "for the head scores, the ablation (with target) or the logit lens of its stacks",
            field="model",
        )


@dataclass(frozen=True)
class Recorded:
    """One forward: each stream's hidden states (L + 1 of (rows, C)), each attention's
    input (rows, C), and at each stream's ``positions`` each attention's context (P, H·D)
    and each norm's input (P, C)."""

    positions: Mapping[Stream, torch.Tensor]
    hidden: Mapping[Stream, tuple[torch.Tensor, ...]]
    inputs: Mapping[tuple[StackName, int], torch.Tensor]
    contexts: Mapping[tuple[StackName, int], torch.Tensor]
    norm_inputs: Mapping[tuple[Stream, int, str], torch.Tensor]


def block(model: EncoderDecoder, stream: Stream, layer: int) -> nn.Module:
    """The stream's layer ``layer`` (the module holding its attention and norms)."""
    path, _ = model.layer_modules[(stream, layer)]
    found: nn.Module = model.model.get_submodule(path.rsplit(".", 1)[0])
    return found


def record(
    model: EncoderDecoder, text: Seq2SeqText, positions: Mapping[Stream, torch.Tensor]
) -> Recorded:
    """One forward over ``text`` (no map held), keeping what ``Recorded`` holds."""
    norms: dict[tuple[Stream, int, str], torch.Tensor] = {}
    inputs: dict[tuple[StackName, int], torch.Tensor] = {}
    contexts: dict[tuple[StackName, int], torch.Tensor] = {}
    # (the module, where its input goes, under which key, at which positions (None: all))
    watched: list[tuple[nn.Module, dict[Any, torch.Tensor], object, torch.Tensor | None]] = []
    streams: tuple[Stream, ...] = ("encoder", "decoder")
    for stream in streams:
        at = positions.get(stream)
        for layer in range(model.layers_of(stream)):
            for stack, norm in SUBLAYERS[stream]:
                module = block(model, stream, layer).get_submodule(norm)
                if at is not None:
                    watched.append((module, norms, (stream, layer, norm), at))
                if stack is not None:
                    _, attention = model.layer_modules[(stack, layer)]
                    watched.append((attention, inputs, (stack, layer), None))
                    if at is not None:
                        projection = out_projection(model, stack, layer)
                        watched.append((projection, contexts, (stack, layer), at))

    def keep(index: int, x: torch.Tensor) -> torch.Tensor:
        _, kept, key, at = watched[index]
        kept[key] = x.detach()[0].float() if at is None else x.detach()[0, at].float()
        return x

    with torch.no_grad():
        hooks = editing([module for module, *_ in watched], [], keep)
        out = seq2seq_forward(model, text, hooks=hooks)
    hidden: dict[Stream, tuple[torch.Tensor, ...]] = {
        "encoder": tuple(h[0].float() for h in out.encoder_hidden_states),
        "decoder": tuple(h[0].float() for h in out.decoder_hidden_states),
    }
    return Recorded(positions, hidden, inputs, contexts, norms)


def stream_parts(
    model: EncoderDecoder, found: Recorded, stream: Stream, layer: int, sublayers: int = 0
) -> Parts:
    """The components of the stream at its recorded positions entering layer ``layer``
    (0-based; the number of layers: the stream's output), after ``sublayers`` more of that
    layer's sublayers (1: the decoder's cross-attention's input)."""
    H, D = model.info().heads, model.info().head_dim
    hidden = found.hidden[stream]
    at = found.positions[stream]
    names = ["embedding"]
    parts = hidden[0][at][None]
    bias = torch.zeros_like(parts[0])
    residual = hidden[0][at]
    steps = [(n, s) for n in range(layer) for s in SUBLAYERS[stream]]
    steps += [(layer, s) for s in SUBLAYERS[stream][:sublayers]]
    for n, (stack, norm_name) in steps:
        pre = found.norm_inputs[(stream, n, norm_name)]
        if stack is None:
            added, b = (pre - residual)[None], torch.zeros_like(bias)
            names.append(f"L{n + 1} MLP")
        else:
            projection = out_projection(model, stack, n)
            W = head_slices(projection, H, D).float()
            context = found.contexts[(stack, n)]
            added = torch.einsum("phd,hdc->hpc", context.view(-1, H, D), W)
            b = output_bias(projection, W.shape[-1]).expand_as(bias)
            kind = "cross " if stack == "cross" else ""
            names += [f"L{n + 1} {kind}H{h + 1}" for h in range(H)]
        norm = block(model, stream, n).get_submodule(norm_name)
        held = frozen(norm, pre)
        parts = held.apply(torch.cat([parts, added]))
        bias = held.apply(bias + b) + held.shift
        with torch.no_grad():
            residual = norm(pre).float()
    layer_input = found.inputs[(stack_at(stream, sublayers), layer)] if sublayers else hidden[layer]
    return Parts(tuple(names), parts, bias, layer_input)


def stack_at(stream: Stream, sublayers: int) -> StackName:
    """The attention a stream's layer reaches after ``sublayers`` of its sublayers."""
    stack = SUBLAYERS[stream][sublayers][0]
    assert stack is not None
    return stack
