"""What wrote to an encoder-decoder's two residual streams, as components (Marian, BART, T5).

An encoder-decoder has two residual streams: the encoder's over the source
(each layer: self-attention, then an MLP) and the decoder's over the target
(each layer: causal self-attention, cross-attention reading the encoder's
output, then an MLP).  Two kinds of layer:

- post-norm (Marian, BART): each sublayer's output is added to the stream and
  the sum goes through a LayerNorm.  With each norm frozen at the forward's
  values (``frozen_norm``) every component so far is carried through it, as
  for BERT (``residual_parts.encoder_parts``); an attention's input is the
  stream itself.
- pre-norm (T5): each sublayer reads an RMSNorm of the stream and adds its
  output to it, unnormed; the stream's output goes through a final norm
  (frozen: the encoder's output, which the cross-attention's keys read).  An
  attention's input is its norm's input, the norm frozen by ``LayerPaths``.

The components: the embedding (token and position embeddings, scaled and
normed as the family does), each earlier head's output (its context through
its slice of the output projection), each earlier MLP's output (what the
stream holds after it beyond what it held before), and the constant part:
the output projections' biases and the norms' shifts.

One forward pass (``seq2seq_heads.seq2seq_forward``, no map held) gives
them: forward pre-hooks keep each norm's input, each attention's input and,
at the positions asked for, each head's context (``access.editing``: the
calling thread's pass only).

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

# transformers model types by the kind of their layers.
POST_NORM_TYPES = frozenset({"marian", "bart"})
PRE_NORM_TYPES = frozenset({"t5"})

# Each layer's sublayers in order: the attention stack (None: the MLP).
SUBLAYERS: dict[Stream, tuple[StackName | None, ...]] = {
    "encoder": ("encoder", None),
    "decoder": ("decoder", "cross", None),
}
# Post-norm: the norm after each sublayer, by its name in the layer.
POST_NORMS: dict[Stream, tuple[str, ...]] = {
    "encoder": ("self_attn_layer_norm", "final_layer_norm"),
    "decoder": ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"),
}
FINAL = -1  # a pre-norm stream's final norm, as a sublayer index


def stream_of(stack: StackName) -> Stream:
    """The stream whose states a stack's queries read (cross-attention: the decoder's)."""
    return "encoder" if stack == "encoder" else "decoder"


def known(model: EncoderDecoder) -> bool:
    """Whether the family's residual streams are of a kind written here."""
    return model.family in POST_NORM_TYPES | PRE_NORM_TYPES


def pre_norm(model: EncoderDecoder) -> bool:
    """Whether the family's sublayers read a norm of the stream (T5), else are post-norm;
    a family of neither kind known is refused with the reason."""
    if known(model):
        return model.family in PRE_NORM_TYPES
    kinds = ", ".join(sorted(POST_NORM_TYPES | PRE_NORM_TYPES))
    raise SpecError(
        f"{model.name} is a {model.family} encoder-decoder: the decomposition knows the "
        f"residual streams of {kinds}; for this model ask for the head scores, the "
        "ablation (with target) or the logit lens of its stacks",
        field="model",
    )


def norm_module(model: EncoderDecoder, stream: Stream, layer: int, index: int) -> nn.Module:
    """The norm of sublayer ``index`` of the stream's layer ``layer``: after it (post-norm),
    before it (pre-norm: ``layer[index].layer_norm``; ``FINAL``: the stream's final norm)."""
    path, _ = model.layer_modules[(stream, layer)]
    hf: nn.Module = model.model
    if not pre_norm(model):
        return hf.get_submodule(path.rsplit(".", 1)[0]).get_submodule(POST_NORMS[stream][index])
    block = path.split(".layer.")[0]  # "encoder.block.0" (T5)
    if index == FINAL:
        name = f"{block.split('.block.')[0]}.final_layer_norm"
    else:
        name = f"{block}.layer.{index}.layer_norm"
    found = hf.get_submodule(name)
    return found


@dataclass(frozen=True)
class Recorded:
    """One forward: each stream's hidden states (L + 1 of (rows, C)), each attention's
    input and each norm's input (rows, C), and at each stream's ``positions`` each
    attention's context (P, H·D)."""

    positions: Mapping[Stream, torch.Tensor]
    hidden: Mapping[Stream, tuple[torch.Tensor, ...]]
    inputs: Mapping[tuple[StackName, int], torch.Tensor]
    contexts: Mapping[tuple[StackName, int], torch.Tensor]
    norm_inputs: Mapping[tuple[Stream, int, int], torch.Tensor]


def record(
    model: EncoderDecoder, text: Seq2SeqText, positions: Mapping[Stream, torch.Tensor]
) -> Recorded:
    """One forward over ``text`` (no map held), keeping what ``Recorded`` holds."""
    norms: dict[tuple[Stream, int, int], torch.Tensor] = {}
    inputs: dict[tuple[StackName, int], torch.Tensor] = {}
    contexts: dict[tuple[StackName, int], torch.Tensor] = {}
    # (the module, where its input goes, under which key, at which positions (None: all))
    watched: list[tuple[nn.Module, dict[Any, torch.Tensor], object, torch.Tensor | None]] = []
    streams: tuple[Stream, ...] = ("encoder", "decoder")
    for stream in streams:
        at = positions.get(stream)
        layers = model.layers_of(stream)
        for layer in range(layers):
            for index, stack in enumerate(SUBLAYERS[stream]):
                module = norm_module(model, stream, layer, index)
                watched.append((module, norms, (stream, layer, index), None))
                if stack is not None:
                    _, attention = model.layer_modules[(stack, layer)]
                    watched.append((attention, inputs, (stack, layer), None))
                    if at is not None:
                        projection = out_projection(model, stack, layer)
                        watched.append((projection, contexts, (stack, layer), at))
        if pre_norm(model):
            final = norm_module(model, stream, 0, FINAL)
            watched.append((final, norms, (stream, layers, FINAL), None))

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
    (0-based; the number of layers: the stream's output, after a pre-norm stream's final
    norm), after ``sublayers`` more of that layer's sublayers (1: the decoder's
    cross-attention's input).  ``layer_input``: the input of the attention reached (its
    norm's input, pre-norm), every position."""
    at = found.positions[stream]
    names = ["embedding"]
    parts = found.hidden[stream][0][at][None]
    bias = torch.zeros_like(parts[0])
    steps = [(n, i) for n in range(layer) for i in range(len(SUBLAYERS[stream]))]
    steps += [(layer, i) for i in range(sublayers)]
    before = pre_norm(model)
    for n, index in steps:
        added, b, more = _written(model, found, stream, n, index)
        names += more
        if before:
            parts, bias = torch.cat([parts, added]), bias + b
            continue
        pre = found.norm_inputs[(stream, n, index)][at]
        held = frozen(norm_module(model, stream, n, index), pre)
        parts = held.apply(torch.cat([parts, added]))
        bias = held.apply(bias + b) + held.shift
    if layer == model.layers_of(stream):
        if before:
            held = frozen(norm_module(model, stream, 0, FINAL), parts.sum(0) + bias)
            parts, bias = held.apply(parts), held.apply(bias) + held.shift
        return Parts(tuple(names), parts, bias, found.hidden[stream][layer])
    stack = SUBLAYERS[stream][sublayers]
    assert stack is not None
    if before:
        return Parts(tuple(names), parts, bias, found.norm_inputs[(stream, layer, sublayers)])
    return Parts(tuple(names), parts, bias, found.inputs[(stack, layer)])


def _written(
    model: EncoderDecoder,
    found: Recorded,
    stream: Stream,
    layer: int,
    index: int,
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """What sublayer ``index`` of ``layer`` wrote to the stream at the recorded positions:
    (components (N, P, C), their constant (P, C), their names)."""
    at = found.positions[stream]
    stack = SUBLAYERS[stream][index]
    if stack is None:  # the MLP: what the stream holds after it beyond what it held before
        if pre_norm(model):
            last = index + 1 == len(SUBLAYERS[stream])
            after = (layer + 1, 0) if last else (layer, index + 1)
            if after[0] == model.layers_of(stream):
                after = (after[0], FINAL)
            before = found.norm_inputs[(stream, layer, index)][at]
            written = found.norm_inputs[(stream, *after)][at] - before
        else:
            previous = norm_module(model, stream, layer, index - 1)
            with torch.no_grad():
                read = previous(found.norm_inputs[(stream, layer, index - 1)][at]).float()
            written = found.norm_inputs[(stream, layer, index)][at] - read
        return written[None], torch.zeros_like(written), [f"L{layer + 1} MLP"]
    info = model.info()
    H, D = info.heads, info.head_dim
    projection = out_projection(model, stack, layer)
    W = head_slices(projection, H, D).float()
    context = found.contexts[(stack, layer)]
    outs = torch.einsum("phd,hdc->hpc", context.view(-1, H, D), W)
    b = output_bias(projection, W.shape[-1]).expand_as(outs[0])
    kind = "cross " if stack == "cross" else ""
    return outs, b, [f"L{layer + 1} {kind}H{h + 1}" for h in range(H)]
