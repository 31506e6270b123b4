"""The body of ``POST /api/model/attention``: one path for every model and every length.

The plain POST answers it as JSON; ``POST /api/model/attention/stream`` sends it
as the ``result`` event after the forward pass's progress (``app.work_stream``).
Both call ``attention_answer``.

Every model answers the core's contract (``forward_stacks``: named stacks of
kept q/k per layer); the request's map options become one ``MapQuery`` per
stack (``app.map_view``), answered by one gatherer over the kept q/k in
bounded blocks of rows (a short input is one block): no (H, T, T) tensor is
held, whatever the length.  The first stack's view is gathered during the
pass itself.  An encoder-decoder adds its decoder and cross stacks
(``encoder_attentions``, ``decoder_attentions``, ``cross_attentions``).

**Sizes.**  An answer is at most ``ATTENTION_VIZ_MODEL_MAX_ANSWER_CELLS`` cells
(422 on ``pool`` before any work: ask with ``pool`` or a region).  An input
whose full maps (layers × heads × T² float32) would take more than
``ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES`` is ``maps_path`` 'long': ``rollout`` is
computed up to ``ATTENTION_VIZ_MODEL_LONG_ROLLOUT_TOKENS`` tokens (each
layer's full head average kept, L products of T × T; past that it is null and
``rollout_note`` says why).  Below the budget every answer is whole, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from attention_core.models import ModelRegistry, TextModel, hidden_tokens, hide_special
from attention_core.models.base.contract import KeptStack, ModelPass, PassOptions
from attention_core.models.maps.features import attention_rollout
from attention_core.models.maps.map_grid import MapGrid, MapQuery
from attention_core.models.maps.pooling import Region
from attention_core.models.maps.text_maps import TokenizedLike
from attention_core.progress import report

from .limits import check_answer_cells
from .map_view import map_query, select_layers, shown_count
from .model_payloads import (
    check_json_maps,
    float_array,
    map_json,
    maps_fields,
    require_attention,
)
from .model_registry import load
from .schemas.model import ModelAttentionRequest, ModelAttentionResponse
from .settings import Settings

FULL_MAPS_SETTING = "ATTENTION_VIZ_MODEL_FULL_MAPS_BYTES"
ROLLOUT_NOTE = (
    "not computed for an input this long: rollout multiplies every layer's full T × T map "
    "into the next (L products of T³), which no pooling or region avoids; it is computed "
    "up to ATTENTION_VIZ_MODEL_LONG_ROLLOUT_TOKENS tokens"
)
BYTES_PER_WEIGHT = 4  # float32


def full_maps_bytes(layers: int, heads: int, tokens: int) -> int:
    """What every layer's (heads, T, T) float32 maps of ``tokens`` tokens would take."""
    return layers * heads * tokens * tokens * BYTES_PER_WEIGHT


def model_sizes(model: TextModel) -> tuple[int, int, int]:
    """(layers of the first stack, layers of any stack, heads) from ``info()``."""
    info = model.info()
    return info.layers, info.deepest, info.heads


@dataclass
class MapsPlan:
    """What one request asks of a model's maps, checked as soon as the tokens are known."""

    body: ModelAttentionRequest
    settings: Settings
    num_layers: int
    layers: list[int]  # 1-based, of the deepest stack
    heads: int
    hidden: dict[str, tuple[bool, ...] | None] = field(default_factory=dict)

    def budget_tokens(self) -> int:
        """The most tokens whose full maps fit ``model_full_maps_bytes``."""
        per_token2 = max(1, self.num_layers * self.heads * BYTES_PER_WEIGHT)
        return math.isqrt(self.settings.model_full_maps_bytes // per_token2)

    def long(self, tokens: int) -> bool:
        return full_maps_bytes(self.num_layers, self.heads, tokens) > (
            self.settings.model_full_maps_bytes
        )

    def rollout_up_to(self) -> int:
        return max(self.settings.model_long_rollout_tokens, self.budget_tokens())

    def hidden_of(self, rows: TokenizedLike, first_is_sink: bool) -> tuple[bool, ...] | None:
        if not self.body.hide_special:
            return None
        hidden = hidden_tokens(rows.special, first=first_is_sink)
        if all(hidden):
            hide_special(torch.zeros(1, len(hidden), len(hidden)), hidden)  # raises the reason
        return hidden

    def view(self, rows: TokenizedLike, first_is_sink: bool) -> MapQuery | None:
        """The first stack's query (value-weighted too: the pass weighs each layer's
        blocks by its values as it goes), its size checked before any work."""
        hidden = self.hidden_of(rows, first_is_sink)
        query = map_query(self.body, self.heads, hidden, len(rows.tokens))
        self.check_size(query, len(rows.tokens), shown_count(hidden, len(rows.tokens)))
        return query

    def check_size(self, query: MapQuery, tokens: int, shown: int) -> None:
        """The answer's cells (``model_max_answer_cells``, 422 on ``pool``) and its JSON
        numbers, before any work."""
        rows, cols = query.shape
        per_layer = len(query.heads or range(self.heads)) + int(self.body.head_average)
        per_layer += int(tokens <= self.rollout_up_to())
        check_answer_cells(len(self.layers), per_layer, query.shape, shown, self.settings)
        numbers = len(self.layers) * per_layer * rows * cols if self.body.format == "json" else 0
        check_json_maps(numbers, len(self.layers), f"{shown} tokens")


def attention_answer(
    body: ModelAttentionRequest, registry: ModelRegistry, settings: Settings
) -> ModelAttentionResponse:
    """The tokens and the asked-for maps of ``body.text`` (see ``model_attention``'s docs)."""
    entry, model = load(registry, body.model)
    require_attention(entry.name, model.info())
    num_layers, deepest, heads = model_sizes(model)
    plan = MapsPlan(body, settings, num_layers, select_layers(body.layers, deepest), heads)
    value_norm = body.measure == "value_norm"
    options = PassOptions(
        view=plan.view,
        values=value_norm,
        averages_up_to=0 if value_norm else plan.rollout_up_to(),
        hidden_states=body.hidden_states,
        device_pooling=settings.model_device_pooling,
    )
    with torch.inference_mode():
        kept = model.forward_stacks(
            body.text, text_b=body.text_b, target=body.target, options=options
        )
        answer = stacks_answer(model, kept, plan)
    return ModelAttentionResponse.model_validate(
        {"model": entry.name, "family": model.family, "causal": model.causal, **answer}
    )


def column_scale(
    model: TextModel, stack: KeptStack, layer: int, measure: str
) -> torch.Tensor | None:
    """value_norm: each head's ‖v_j W_O^h‖ per key of one layer (H, S); else None."""
    if measure != "value_norm":
        return None
    return stack.layers[layer].value_lengths(model.head_outputs(stack.name, layer))


def stack_grids(
    model: TextModel, stack: KeptStack, query: MapQuery, layers: list[int], measure: str
) -> list[MapGrid]:
    """The listed layers' (1-based, those the stack has) grids of ``query``; progress
    ``maps`` per layer when they are rebuilt from the kept q/k (not gathered in the pass)."""
    grids = []
    present = [n for n in layers if n <= len(stack.layers)]
    for i, n in enumerate(present):
        grid = stack.gathered(n - 1, query)
        if grid is None:
            grid = stack.grid(n - 1, query, column_scale(model, stack, n - 1, measure))
            report("maps", i + 1, len(present))
        grids.append(grid)
    return grids


def rollout_of(model: TextModel, stack: KeptStack, measure: str, up_to: int) -> torch.Tensor | None:
    """(L, T, T) rollout of a self-attention stack, None past ``up_to`` tokens.  Value-
    weighted maps roll out their own head averages (rows re-summed to 1, like weights)."""
    if measure == "weights":
        return stack.rollout
    T = len(stack.tokens)
    if T > up_to or not stack.self_attention:
        return None
    whole = MapQuery(None, Region(0, T, 0, T), (1, 1), (), average=True)
    averages = []
    for layer in range(len(stack.layers)):
        grid = stack.grid(layer, whole, column_scale(model, stack, layer, measure))
        assert grid.average is not None
        averages.append(grid.average[None])
    return attention_rollout(averages)


def shown_positions(hidden: tuple[bool, ...] | None, count: int) -> list[int]:
    return list(range(count)) if hidden is None else [i for i, h in enumerate(hidden) if not h]


def stacks_answer(model: TextModel, kept: ModelPass, plan: MapsPlan) -> dict[str, Any]:
    """``MapsResponse``'s fields (the first stack's) and, for a model with more stacks,
    ``Seq2SeqMaps``'s."""
    body, measure = plan.body, plan.body.measure
    first = kept.stack()
    T = len(first.tokens)
    hidden = plan.hidden_of(first.tokenized, first.first_is_sink)
    query = map_query(body, plan.heads, hidden, T)
    plan.check_size(query, T, shown_count(hidden, T))
    positions = shown_positions(hidden, T)
    grids = stack_grids(model, first, query, plan.layers, measure)
    present = [n for n in plan.layers if n <= len(first.layers)]
    rollout = rollout_of(model, first, measure, plan.rollout_up_to())
    answer = maps_fields(
        first, positions, query, body, plan.layers, plan.heads, grids, rollout, present
    )
    answer.update(
        {
            "rollout_note": None if rollout is not None else ROLLOUT_NOTE,
            "maps_path": "long" if plan.long(T) else "full",
        }
    )
    if body.hidden_states:
        rows = torch.tensor(positions)
        answer["hidden_states"] = [
            float_array(first.hidden_states[n].index_select(0, rows)) for n in present
        ]
    if len(kept.stacks) > 1:
        answer.update(other_stacks(model, kept, plan, answer["attentions"]))
    return answer


def _seq2seq_queries(
    plan: MapsPlan,
    target_hidden: tuple[bool, ...] | None,
    source_hidden: tuple[bool, ...] | None,
    S: int,
    T: int,
) -> tuple[MapQuery, MapQuery]:
    """The decoder's self-attention maps' query (T × T) and the cross maps' (T × S)."""
    body = plan.body
    self_query = map_query(body, plan.heads, target_hidden, T, region=False)
    cross_query = map_query(
        body,
        plan.heads,
        target_hidden,
        T,
        hidden_keys=source_hidden if source_hidden is not None else None,
        num_cols=S,
        region=False,
    )
    if target_hidden is not None and source_hidden is None:
        cross_query = replace(cross_query, hidden_keys=(False,) * S)
    return self_query, cross_query


def _json_numbers(plan: MapsPlan, self_query: MapQuery, cross_query: MapQuery) -> int:
    """The numbers the decoder's and cross maps put in a JSON answer (0: not JSON)."""
    if plan.body.format != "json":
        return 0
    per = len(self_query.heads or range(plan.heads))
    return (
        len(plan.layers)
        * per
        * (self_query.shape[0] * self_query.shape[1] + cross_query.shape[0] * cross_query.shape[1])
    )


def other_stacks(
    model: TextModel, kept: ModelPass, plan: MapsPlan, first_maps: list[object]
) -> dict[str, Any]:
    """An encoder-decoder's ``Seq2SeqMaps``: the target's tokens and the decoder's and
    cross stacks' maps (``heads`` and ``pool`` apply; ``rows``/``cols`` index the source,
    so they shape the encoder's maps only)."""
    body = plan.body
    source, decoder, cross = kept.stack("encoder"), kept.stack("decoder"), kept.stack("cross")
    S, T = len(source.tokens), len(decoder.tokens)
    source_hidden = plan.hidden_of(source.tokenized, source.first_is_sink)
    target_hidden = None
    if body.hide_special:
        target_hidden = hidden_tokens(decoder.special, first=decoder.first_is_sink)
    target_kept = shown_positions(target_hidden, T)
    source_kept = shown_positions(source_hidden, S)
    self_query, cross_query = _seq2seq_queries(plan, target_hidden, source_hidden, S, T)
    check_json_maps(
        _json_numbers(plan, self_query, cross_query),
        len(plan.layers),
        f"{len(source_kept)} source and {len(target_kept)} target tokens",
    )
    measure = body.measure
    return {
        "source_tokens": [source.tokens[i] for i in source_kept],
        "target_tokens": [decoder.tokens[i] for i in target_kept],
        "target_positions": target_kept,
        "all_target_tokens": list(decoder.tokens),
        "target_special": list(decoder.special),
        "encoder_attentions": first_maps,
        "decoder_attentions": [
            map_json(g.heads, body)
            for g in stack_grids(model, decoder, self_query, plan.layers, measure)
        ],
        "cross_attentions": [
            map_json(g.heads, body)
            for g in stack_grids(model, cross, cross_query, plan.layers, measure)
        ],
    }
