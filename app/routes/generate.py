"""``POST /api/model/generate``: a decoder continues a prompt; the answer holds the new
tokens and the attention of the whole sequence, in /api/model/attention's formats."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

import torch
from fastapi import APIRouter, Request, Response

from attention_core.models import Decoder, ModelRegistry, ModelUnsupported, TextModel
from attention_core.models.text.generation import Sampling

from ..generated_maps import generated_maps
from ..limits import over_limit
from ..model_registry import load
from ..model_work import model_answer
from ..schemas.model import GenerateRequest, GenerateResponse
from ..settings import Settings
from .common import ERRORS, SettingsDep, json_response

if TYPE_CHECKING:  # importing it imports transformers (the optional extra)
    from attention_core.models.hf.seq2seq import EncoderDecoder

router = APIRouter(prefix="/api/model", tags=["model"])


def _writes_target(model: TextModel) -> TypeGuard[EncoderDecoder]:
    """Whether ``model`` writes a target beside its source (its stacks say so)."""
    return model.capabilities.reads_target


def _sampling(body: GenerateRequest) -> Sampling:
    return Sampling(temperature=float(body.temperature), top_k=body.top_k, seed=body.seed)


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


def generation_answer(body: GenerateRequest, registry: ModelRegistry, settings: Settings) -> object:
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
    if _writes_target(model):  # prompt: the source; the maps: the three stacks
        return _seq2seq_answer(model, entry.name, body, settings)
    assert isinstance(model, Decoder)  # the one-stack model that writes
    result = model.generate(
        body.prompt, body.max_new_tokens, capture_attentions=False, **_sampling(body)
    )
    with torch.inference_mode():
        maps = generated_maps(
            model, body, settings, lambda options: model.pass_of(result.sequence, options)
        )
    payload = {"model": entry.name, "family": model.family, "causal": True, **maps}
    shown = payload["positions"]
    generated = result.generated
    payload.update(
        {
            "prompt_tokens": len(result.prompt),
            "generated": [generated[i] for i in shown],
            "generated_ids": list(result.new_ids),
            "generated_tokens": list(result.new_tokens),
            "generated_text": result.text,
            "stop_reason": result.stop_reason,
            "seed": result.seed,
            "temperature": float(body.temperature),
            "top_k": body.top_k,
        }
    )
    return payload


def _seq2seq_answer(
    model: EncoderDecoder, name: str, body: GenerateRequest, settings: Settings
) -> dict[str, object]:
    """An encoder-decoder's generation: the target it wrote for the source (the prompt),
    keeping no map, then its three stacks from one pass over the source and the target
    (``generated_maps``), at any length."""
    written = model.generate(
        body.prompt, body.max_new_tokens, capture_attentions=False, **_sampling(body)
    )
    with torch.inference_mode():
        maps = generated_maps(
            model,
            body,
            settings,
            lambda options: model.forward_stacks(
                body.prompt, target=written.new_ids, options=options
            ),
        )
    return {
        "model": name,
        "family": model.family,
        "causal": False,
        **maps,
        "prompt_tokens": len(written.source),
        "generated": [False] * len(maps["positions"]),  # the source: nothing written there
        "generated_ids": list(written.new_ids),
        "generated_tokens": list(written.new_tokens),
        "generated_text": written.text,
        "stop_reason": written.stop_reason,
        "seed": written.seed,
        "temperature": float(body.temperature),
        "top_k": body.top_k,
    }
