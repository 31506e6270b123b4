"""Why a head of an encoder-decoder looks where it looks: ``qk_decomposition`` on each stack.

- ``encoder``: query and key are source tokens, both sides' components the
  encoder stream's entering the layer;
- ``decoder``: causal self-attention over the target (the decoder's input),
  both sides the decoder stream's entering the layer;
- ``cross``: the query is a target position, its components the decoder
  stream's entering the cross-attention (the layer's self-attention
  included), the key a source token, its components the encoder's output's
  (every encoder layer's), named ``encoder …`` (``Why.key_components``).

The components come from one forward that holds no map (``seq2seq_streams``);
``score`` and ``weight`` from the layer's own q and k over the keys the
query's softmax reads, through ``attention_with_steps``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import SpecError
from ..models.base.capabilities import StackName
from ..models.hf.seq2seq import EncoderDecoder
from .qk_decomposition import BIAS, Side, Why, cell_weight, pair_grid
from .qk_paths import LayerPaths
from .seq2seq_heads import Seq2SeqText
from .seq2seq_streams import (
    SUBLAYERS,
    Stream,
    norm_module,
    pre_norm,
    record,
    stream_of,
    stream_parts,
)

# The sublayer of each stack's attention in its layer.
SUBLAYERS_OF: dict[StackName, int] = {
    stack: i for stream in SUBLAYERS.values() for i, stack in enumerate(stream) if stack
}


def stack_paths(
    model: EncoderDecoder, stack: StackName, layer: int, side: str = "query"
) -> LayerPaths:
    """One attention layer's q/k/v paths: post-norm, its input is the stream, already
    normed; pre-norm (T5), its sublayer's norm first, but for cross-attention's key side
    (the encoder's output, final-normed already)."""
    _, attention = model.layer_modules[(stack, layer)]
    info = model.info()
    H, D = info.heads, info.head_dim
    names = ("q", "k", "v") if hasattr(attention, "q") else ("q_proj", "k_proj", "v_proj")
    qkv = tuple(attention.get_submodule(n) for n in names)
    scale = getattr(attention, "scaling", None)
    norm = None
    if pre_norm(model) and not (stack == "cross" and side == "key"):
        norm = norm_module(model, stream_of(stack), layer, SUBLAYERS_OF[stack])
    sizes = (H, H, D)
    return LayerPaths(norm, qkv, info.hidden, sizes, float(scale or D**-0.5))  # type: ignore[arg-type]


def position_bias(
    model: EncoderDecoder, stack: StackName, row: int, cols: torch.Tensor, head: int
) -> torch.Tensor | None:
    """(1, S) the family's score bias of ``head`` for query ``row`` over keys ``cols``: T5's
    relative position bias, its stack's first layer's (every layer adds it); None for a
    family or stack without one (cross-attention)."""
    first: Any = model.layer_modules[(stack, 0)][1]
    table = getattr(first, "relative_attention_bias", None)
    if not isinstance(table, torch.nn.Module):
        return None
    buckets = first._relative_position_bucket(
        (cols - row)[None],
        bidirectional=not first.is_decoder,
        num_buckets=first.relative_attention_num_buckets,
        max_distance=first.relative_attention_max_distance,
    )
    found: torch.Tensor = table(buckets)[..., head].float()
    return found


def _check(
    model: EncoderDecoder, text: Seq2SeqText, stack: StackName, cell: tuple[int, int, int, int]
) -> None:
    """0-based layer, head, row, col of ``stack``: a ``SpecError`` naming the field."""
    layer, head, row, col = cell
    layers, heads = model.layers_of(stack), model.info().heads
    for field, value, size in (("layer", layer, layers), ("head", head, heads)):
        if not 0 <= value < size:
            raise SpecError(
                f"{field} is {value + 1}; the {stack} stack has {field}s 1 to {size}",
                field=field,
            )
    sizes = {"encoder": len(text.source), "decoder": len(text.target)}
    for field, value, stream in (
        ("row", row, stream_of(stack)),
        ("col", col, "decoder" if stack == "decoder" else "encoder"),
    ):
        size, what = sizes[stream], "source" if stream == "encoder" else "target (decoder input)"
        if not 0 <= value < size:
            raise SpecError(
                f"{field} is {value}; the {what} has {size} tokens (0 to {size - 1})",
                field=field,
            )
    if stack == "decoder" and col > row:
        raise SpecError(
            f"the cell ({row}, {col}) is masked: the decoder's query {row} sees target "
            f"positions 0 to {row}",
            field="col",
        )


def seq2seq_why(
    model: EncoderDecoder,
    text: Seq2SeqText,
    stack: StackName,
    layer: int,
    head: int,
    row: int,
    col: int,
) -> Why:
    """The decomposition of one cell of ``stack`` (layer, head, row, col all 0-based; row a
    target position for ``decoder`` and ``cross``, col a source token for ``cross``)."""
    pre_norm(model)  # a family of an unknown kind: refused with the reason
    _check(model, text, stack, (layer, head, row, col))
    paths = stack_paths(model, stack, layer)
    key_paths = stack_paths(model, stack, layer, "key")
    key_stream: Stream = "decoder" if stack == "decoder" else "encoder"
    with torch.no_grad():
        if stack == "cross":
            at: dict[Stream, torch.Tensor] = {
                "decoder": torch.tensor([row]),
                "encoder": torch.tensor([col]),
            }
            found = record(model, text, at)
            query = stream_parts(model, found, "decoder", layer, sublayers=1)
            key = stream_parts(model, found, "encoder", model.layers_of("encoder"))
            q_side, k_side = Side.of(query, 0, row), Side.of(key, 0, col)
            keys = key.layer_input
        else:
            found = record(model, text, {stream_of(stack): torch.tensor([row, col])})
            query = key = stream_parts(model, found, stream_of(stack), layer)
            q_side, k_side = Side.of(query, 0, row), Side.of(key, 1, col)
            keys = query.layer_input[: row + 1] if stack == "decoder" else query.layer_input
        grid = pair_grid(paths, head, q_side, k_side, key_paths)
        seen = torch.arange(len(keys))
        bias = position_bias(model, stack, row, seen, head)
        score, weight = cell_weight(
            paths, head, (q_side.x, row), (keys, seen), col, key_paths, bias
        )
    names = (*query.names, BIAS)
    extra = None if bias is None else float(bias[0, col])
    if key_stream == stream_of(stack):
        return Why(names, grid, score, weight, paths.scale, score_bias=extra)
    key_names = tuple(f"encoder {n}" for n in (*key.names, BIAS))
    return Why(names, grid, score, weight, paths.scale, key_components=key_names, score_bias=extra)
