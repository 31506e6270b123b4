"""``POST /api/model/generate``: a decoder continues a prompt; the answer holds the new
tokens and the attention of the whole sequence, in /api/model/attention's formats."""

from __future__ import annotations

import torch
from fastapi import APIRouter, Request, Response

from attention_core.models import ModelRegistry, ModelUnsupported
from attention_core.models.base.writing import Sampling

from ..generated_maps import generated_maps, written_fields
from ..limits import over_limit
from ..model_registry import load
from ..model_work import model_answer
from ..schemas.model import GenerateRequest, GenerateResponse
from ..settings import Settings
from .common import ERRORS, SettingsDep, json_response

router = APIRouter(prefix="/api/model", tags=["model"])


@router.post("/generate", response_model=GenerateResponse, responses=ERRORS)
async def generate(body: GenerateRequest, request: Request, settings: SettingsDep) -> Response:
    """Continue ``prompt`` with a decoder: greedy (``temperature`` 0, the default) or
    sampled with ``temperature``, ``top_k`` and ``seed``, through a KV cache.

    Stops after ``max_new_tokens`` or an end-of-sequence token.  The maps cover
    prompt and generated tokens alike (``generated`` marks the new ones): row i
    is what token i attended to when it was the model's input, so the row
    before a generated token is what the model looked at when it wrote it.

    An encoder-decoder (T5, BART, Marian): ``prompt`` is the source and
    ``generated_ids`` the target it writes (greedy: transformers'
    ``generate(do_sample=False)``); the answer adds the encoder's, the
    decoder's and the cross-attention's maps over the whole target.
    """
    return await model_answer(request, lambda registry: _generate(body, registry, settings))


def _generate(body: GenerateRequest, registry: ModelRegistry, settings: Settings) -> Response:
    return json_response(generation_answer(body, registry, settings))


def generation_answer(
    body: GenerateRequest, registry: ModelRegistry, settings: Settings
) -> GenerateResponse:
    """The body of ``POST /api/model/generate`` (and of its stream's ``result``)."""
    limit = settings.max_new_tokens
    if body.max_new_tokens > limit:
        raise over_limit(
            ["body", "max_new_tokens"],
            f"max_new_tokens is {body.max_new_tokens}; the limit is {limit} "
            "(ATTENTION_VIZ_MAX_NEW_TOKENS)",
            limit=limit,
            found=body.max_new_tokens,
            setting="ATTENTION_VIZ_MAX_NEW_TOKENS",
        )
    entry, model = load(registry, body.model)
    capabilities = model.capabilities
    if not capabilities.writes:
        raise ModelUnsupported(
            f"{capabilities.described(entry.name, model.family)}: it reads a whole text at "
            "once and cannot write one; choose a decoder (GET /api/models lists causal ones)",
            field="model",
        )
    sampling = Sampling(temperature=float(body.temperature), top_k=body.top_k, seed=body.seed)
    written = model.write(body.prompt, body.max_new_tokens, **sampling)
    with torch.inference_mode():
        maps = generated_maps(model, body, settings, written.reread)
    return GenerateResponse.model_validate(
        {
            "model": entry.name,
            "family": model.family,
            "causal": model.causal,
            **maps,
            **written_fields(written, maps["positions"]),
            "temperature": float(body.temperature),
            "top_k": body.top_k,
        }
    )
