"""The real-model page (``/model``): every model the server has, layer by head.

A thin shell like the other pages: the model list (``GET /api/models``'s, read
from config files and safetensors headers only, nothing loaded) and the
default texts go to the browser as JSON in a ``<script type="application/json">``
block; the picker is rendered here, with the model the URL names already
chosen, so nothing moves when the page's script starts.  Tokens, attention
maps, generations and word comparisons all come from the ``/api/model`` routes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attention_core.models.checkpoints.weight_dtype import size_text

from ..family_labels import FAMILY_LABELS
from ..model_listing import listing
from ..model_registry import get_registry
from ..schemas.heads import SCORE_LABELS
from ..schemas.model import ModelSummary
from ..schemas.pages import (
    CompareTexts,
    ModelOption,
    ModelOptions,
    ModelPageData,
    ModelPageLimits,
    ModelTexts,
)
from ..templating import templates

router = APIRouter(include_in_schema=False)

TEXTS = ModelTexts(
    text="The cat sat on the mat because it was tired.",
    text_b="",
    prompt="The cat sat on the mat because",
    max_new_tokens=20,
    compare=CompareTexts(
        text_a="the river bank was muddy", text_b="the bank approved the loan", word="bank"
    ),
)

FAMILY_NAMES = FAMILY_LABELS
REASON_CHARS = 90


def count_of(n: int, noun: str) -> str:
    """``1 layer``, ``4 layers``: a count and its noun, plural when it is not one."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def describe(model: dict[str, Any]) -> str:
    """One line about a supported model: family, kind, sizes, parameters, context."""
    family = FAMILY_NAMES.get(model["family"] or "", model["family"] or "unknown family")
    kind = model.get("kind") or ("decoder" if model["causal"] else "encoder")
    heads = f"{count_of(model['layers'], 'layer')} × {count_of(model['heads'], 'head')}"
    if model["kv_heads"] and model["kv_heads"] != model["heads"]:
        heads += f" ({count_of(model['kv_heads'], 'key/value head')})"
    parts = [f"{family} {kind}", heads]
    if model["parameters"]:
        parts.append(f"{model['parameters']:,} parameters")
    if model["max_positions"]:
        parts.append(f"reads up to {count_of(model['max_positions'], 'token')}")
    if model.get("dtype") and model.get("held_bytes"):
        held = size_text(model["held_bytes"])
        parts.append(f"{model['dtype']} weights, {held}, on {model['device']}")
    if model.get("placement"):
        parts.append(str(model["placement"]))
    return " · ".join(parts)


def option_label(model: dict[str, Any]) -> str:
    """What the picker shows: the name and what it is, or why it cannot be shown."""
    if model["supported"]:
        kind = model.get("kind") or ("decoder" if model["causal"] else "encoder")
        family = FAMILY_NAMES.get(model["family"] or "", model["family"] or "")
        return f"{model['name']} — {family} {kind}, {model['layers']}×{model['heads']}"
    reason = str(model["reason"] or "unknown reason")
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 1] + "…"
    return f"{model['name']} — not supported: {reason}"


def option(model: ModelSummary) -> ModelOption:
    """A model of the listing with its picker label and description (``describe`` and
    ``option_label`` read its fields, sizes included, by name)."""
    fields = model.model_dump()
    about = describe(fields) if model.supported else (model.reason or "")
    return ModelOption.model_validate({**fields, "label": option_label(fields), "about": about})


def model_list(request: Request) -> ModelOptions:
    """``GET /api/models``'s body, each model with its picker label and description."""
    body = listing(get_registry(request))
    return ModelOptions(default=body.default, models=[option(m) for m in body.models])


def chosen_model(listing: ModelOptions, asked: str | None) -> ModelOption | None:
    """The model the URL asks for when it can be shown, else the default (or the first
    supported one); None when there is no supported model at all."""
    supported = [m for m in listing.models if m.supported]
    by_name = {m.name: m for m in supported}
    if asked is not None and asked in by_name:
        return by_name[asked]
    return by_name.get(listing.default or "") or (supported[0] if supported else None)


@router.get("/model", response_class=HTMLResponse, name="model_page")
def model_page(request: Request) -> HTMLResponse:
    settings = request.app.state.settings
    listing = model_list(request)
    chosen = chosen_model(listing, request.query_params.get("model"))
    generating = bool(chosen and chosen.causal) and request.query_params.get("gen") == "1"
    initial = ModelPageData(
        **TEXTS.model_dump(),
        models=listing,
        score_names=list(SCORE_LABELS),  # "Sort by" lists them before any scores arrive
        limits=ModelPageLimits(
            max_new_tokens=settings.max_new_tokens,
            max_vocabulary_words=settings.max_vocabulary_words,
            max_token_chars=settings.max_token_chars,
        ),
    )
    return templates.TemplateResponse(
        request=request,
        name="model.html",
        context={
            "page": "model",
            "title": "Real models",
            "initial": initial.model_dump(mode="json"),
            "models": listing.models,
            "chosen": chosen,
            "generating": generating,
            "max_new_tokens": settings.max_new_tokens,
        },
    )
