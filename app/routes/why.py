"""Why a head looks where it looks (``/api/model/why``) and which heads matter, in one pass
(``/api/model/attribute``).  Thin routes over ``attention_core.analysis.qk_decomposition``
and ``attribution``; layers and heads from 1 here, from 0 in the core."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from attention_core import SpecError
from attention_core.analysis import head_model
from attention_core.analysis.ablation import ablation_cost
from attention_core.analysis.access import DecoderHeadModel, HeadModel
from attention_core.analysis.attribution import attribute, decoder_heads, star_cost
from attention_core.analysis.qk_decomposition import why
from attention_core.models import ModelRegistry

from ..limits import over_limit
from ..model_registry import load
from ..model_work import model_answer
from ..schemas.why import AttributeRequest, AttributeResponse, WhyRequest, WhyResponse
from ..seq2seq_why_answer import seq2seq_attribute_answer, seq2seq_why_answer
from ..settings import Settings
from ..why_payloads import attribute_payload, why_payload
from .common import ERRORS, SettingsDep, json_response, reads_target

router = APIRouter(prefix="/api/model", tags=["model"])


@router.post("/why", response_model=WhyResponse, responses=ERRORS)
async def why_cell(body: WhyRequest, request: Request) -> Response:
    """One cell's pre-softmax score split into (query component, key component) pairs over
    what wrote to the residual stream, norms frozen at the forward's values."""
    return await model_answer(request, lambda registry: _why_cell(body, registry))


def _why_cell(body: WhyRequest, registry: ModelRegistry) -> Response:
    entry, model = load(registry, body.model)
    if reads_target(model):
        return json_response(seq2seq_why_answer(model, entry.name, body))
    model.capabilities.check_fields(entry.name, body.target, body.stack)
    heads = head_model(model)
    tokens = heads.tokenize(body.text)
    result = why(heads, tokens.ids, body.layer - 1, body.head - 1, body.row, body.col)
    cell = (body.layer, body.head, body.row, body.col)
    tokens_shown = list(tokens.tokens)
    return json_response(
        why_payload(entry.name, model.family, tokens_shown, cell, result, body.top)
    )


def _token_id(heads: DecoderHeadModel, token: int | str | None) -> int | None:
    """A target token given as an id, or as the text of one token (None: the model's own)."""
    if token is None or isinstance(token, int):
        return token
    found = heads.tokenize(token)
    ordinary = [i for i, special in zip(found.ids, found.special, strict=True) if not special]
    if len(ordinary) != 1:
        raise SpecError(
            f"target.token {token!r} is {len(ordinary)} tokens for this model; give one "
            "token's text, or its id",
            field="target.token",
        )
    return ordinary[0]


def _check_cost(heads: HeadModel, method: str, length: int, settings: Settings) -> None:
    """Exact ablation costs what /ablate's each_head does (layers × heads × T² attention
    cells, its limit); AtP* recomputes heads × that at most (heads × the limit)."""
    L, H = heads.num_layers, heads.num_heads
    if method == "exact":
        cost, limit = ablation_cost(L, H, length), settings.max_ablation_cells
        what, unit = "exact ablation costs layers × heads × T²", "ATTENTION_VIZ_MAX_ABLATION_CELLS"
    elif method == "atp_star":
        cost, limit = star_cost(L, H, length), settings.max_ablation_cells * H
        what = (
            "atp_star costs layers·(layers − 1)/2 × heads² × T² (its softmax recomputation) "
            "+ (layers − 1) × 3 × layers × heads × T² (GradDrop's passes, each counted as a "
            "forward and a backward)"
        )
        unit = "heads × ATTENTION_VIZ_MAX_ABLATION_CELLS"
    else:
        return
    if cost > limit:
        raise over_limit(
            ["body", "method"],
            f"{what} = {cost} attention cells for {length} tokens; the limit is {limit} "
            f"({unit}): use a shorter text or attribution_patching",
            limit=limit,
            found=cost,
            setting="ATTENTION_VIZ_MAX_ABLATION_CELLS",
        )


@router.post("/attribute", response_model=AttributeResponse, responses=ERRORS)
async def attribute_heads(
    body: AttributeRequest, request: Request, settings: SettingsDep
) -> Response:
    """Every head's ablation effect on a loss (the text's next-token loss, or −log p of one
    token at one position), estimated by attribution patching or AtP* from one forward and
    one backward pass; with ``exact`` also every head ablated on its own."""
    return await model_answer(request, lambda registry: _attribute_heads(body, registry, settings))


def _attribute_heads(
    body: AttributeRequest, registry: ModelRegistry, settings: Settings
) -> Response:
    entry, model = load(registry, body.model)
    if reads_target(model):
        return json_response(seq2seq_attribute_answer(model, entry.name, body, settings))
    target = body.target
    model.capabilities.check_fields(
        entry.name, target if isinstance(target, str) else None, body.stack
    )
    heads = decoder_heads(head_model(model), entry.name)
    tokens = heads.tokenize(body.text)
    _check_cost(heads, body.method, len(tokens.ids), settings)
    asked = None
    if target is not None and not isinstance(target, str):
        asked = (target.position, _token_id(heads, target.token))
    result = attribute(
        heads, tokens.ids, body.method, body.ablation, asked, entry.name, body.confirm_top
    )
    shown = list(tokens.tokens)
    return json_response(attribute_payload(entry.name, model.family, shown, heads, result))
