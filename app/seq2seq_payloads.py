"""Encoder-decoder results as API bodies: the three stacks of maps, and one head of any stack.

An encoder-decoder's answer is ``MapsResponse`` for its encoder (the source:
``tokens``, ``attentions``, ``head_average``, ``rollout``) plus ``Seq2SeqMaps``:
``encoder_attentions`` (heads, S, S), ``decoder_attentions`` (heads, T, T) and
``cross_attentions`` (heads, T, S), with the source and target tokens.
"hide special" hides the special tokens of each side (never the first word of
a source: an encoder-decoder's source has no first-token sink) and
renormalizes every row over the columns left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from attention_core import SpecError
from attention_core.models import hidden_tokens

from .map_view import select_layers
from .model_payloads import check_json_maps, float_array, map_json
from .schemas.model import MapOptions

if TYPE_CHECKING:  # importing them imports transformers (the optional extra)
    from attention_core.models.hf.seq2seq import GeneratedTarget, Seq2SeqMaps


def hide_rows_columns(
    weights: torch.Tensor, hidden_rows: Sequence[bool], hidden_columns: Sequence[bool]
) -> torch.Tensor:
    """Drop flagged rows and columns, renormalize rows to 1 (a row left all zero stays 0).

    Shapes: (..., T, S) -> (..., T_kept, S_kept).
    """
    rows = torch.tensor([not h for h in hidden_rows]).nonzero().squeeze(-1)  # (T_kept,)
    columns = torch.tensor([not h for h in hidden_columns]).nonzero().squeeze(-1)  # (S_kept,)
    kept = weights.index_select(-2, rows).index_select(-1, columns)
    totals = kept.sum(dim=-1, keepdim=True)
    return kept / totals.clamp_min(torch.finfo(kept.dtype).tiny)


def seq2seq_payload(
    maps: Seq2SeqMaps, options: MapOptions, *, model: str, family: str, hidden_states: bool
) -> dict[str, Any]:
    """``ModelAttentionResponse`` (or the maps of ``GenerateResponse``) for an encoder-decoder.

    ``layers`` numbers the encoder's layers and the decoder's alike (1..L); a
    model whose two stacks differ in depth gets each stack's layers that exist.
    """
    encoder_layers, decoder_layers = len(maps.layer_attentions), len(maps.decoder_attentions)
    layers = select_layers(options.layers, max(encoder_layers, decoder_layers))
    source_hidden = (
        hidden_tokens(maps.source.special, first=False)
        if options.hide_special
        else (False,) * len(maps.source)
    )
    target_hidden = (
        hidden_tokens(maps.target.special, first=False)
        if options.hide_special
        else (False,) * len(maps.target)
    )
    source_kept = [i for i, h in enumerate(source_hidden) if not h]
    target_kept = [i for i, h in enumerate(target_hidden) if not h]
    if not source_kept:
        raise SpecError(
            "every source token is special; nothing is left to show (turn hide_special off)",
            field="hide_special",
        )
    S, T = len(source_kept), len(target_kept)
    H = int(maps.layer_attentions[0].shape[0])
    numbers = 0
    if options.format == "json":
        numbers = len(layers) * ((2 * H + 2) * S * S + H * T * T + H * T * S)
    if hidden_states:
        numbers += len(layers) * S * int(maps.layer_hidden_states[0].shape[-1])
    check_json_maps(numbers, len(layers), f"{S} source and {T} target tokens")

    def encoder_side(tensor: torch.Tensor) -> torch.Tensor:
        return hide_rows_columns(tensor, source_hidden, source_hidden)

    def each(
        tensors: Sequence[torch.Tensor], rows: Sequence[bool], columns: Sequence[bool]
    ) -> list[object]:
        return [
            map_json(hide_rows_columns(tensors[n - 1], rows, columns), options)
            for n in layers
            if n <= len(tensors)
        ]

    encoder_attentions = each(maps.layer_attentions, source_hidden, source_hidden)
    source_tokens = [maps.source.tokens[i] for i in source_kept]
    payload: dict[str, Any] = {
        "model": model,
        "family": family,
        "causal": False,
        "tokens": source_tokens,
        "token_type_ids": [0] * S,
        "positions": source_kept,
        "all_tokens": list(maps.source.tokens),
        "special": list(maps.source.special),
        "hide_special": options.hide_special,
        "layers": layers,
        "heads": H,
        "format": options.format,
        "attentions": encoder_attentions,
        "head_average": [
            map_json(encoder_side(maps.head_averages[n - 1]), options)
            for n in layers
            if n <= encoder_layers
        ],
        "rollout": [
            map_json(encoder_side(maps.rollout[n - 1]), options)
            for n in layers
            if n <= encoder_layers
        ],
        "source_tokens": source_tokens,
        "target_tokens": [maps.target.tokens[i] for i in target_kept],
        "target_positions": target_kept,
        "all_target_tokens": list(maps.target.tokens),
        "target_special": list(maps.target.special),
        "encoder_attentions": encoder_attentions,
        "decoder_attentions": each(maps.decoder_attentions, target_hidden, target_hidden),
        "cross_attentions": each(maps.cross_attentions, target_hidden, source_hidden),
    }
    if hidden_states:
        rows = torch.tensor(source_kept)
        payload["hidden_states"] = [
            float_array(maps.layer_hidden_states[n].index_select(0, rows))
            for n in layers
            if n <= encoder_layers
        ]
    return payload


def seq2seq_generation_payload(
    result: GeneratedTarget, options: MapOptions, *, model: str, family: str
) -> dict[str, Any]:
    """``GenerateResponse`` for an encoder-decoder: the written target and the three stacks.

    ``prompt_tokens`` is the source's length; ``generated`` marks the shown
    source tokens (none written); ``generated_ids`` the new target ids.
    """
    payload = seq2seq_payload(result, options, model=model, family=family, hidden_states=False)
    payload.update(
        {
            "prompt_tokens": len(result.source),
            "generated": [False] * len(payload["positions"]),
            "generated_ids": list(result.new_ids),
            "generated_tokens": list(result.new_tokens),
            "generated_text": result.text,
            "stop_reason": result.stop_reason,
            "seed": result.seed,
        }
    )
    return payload


def refuse_one_stack_options(name: str, body: MapOptions) -> None:
    """``heads``, ``rows``, ``cols``, ``pool`` and ``measure`` shape one stack's maps: an
    encoder-decoder's three stacks do not take them yet (refused, never silently ignored)."""
    asked = {
        "heads": body.heads is not None,
        "rows": body.rows is not None,
        "cols": body.cols is not None,
        "pool": body.pool is not None,
        "measure": getattr(body, "measure", "weights") != "weights",
    }
    for field, given in asked.items():
        if given:
            raise SpecError(
                f"{field} is for models with one stack; {name!r} is an encoder-decoder, "
                f"whose maps come whole (leave {field} out)",
                field=field,
            )
