"""The toy attention API: traces, comparisons, presets, vocabularies, lessons."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Response

from attention_core import (
    PRESETS,
    TOY_VOCABULARY,
    compare,
    dot_product_variance,
    expand,
    get_preset,
    run,
    softmax_sharpness,
)

from ..compute import offload, width_of
from ..convert import (
    comparison_answer,
    preset_summary,
    request_from_spec,
    spec_from_options,
    spec_from_request,
    trace_answer,
)
from ..errors import error_response
from ..json_reply import json_bytes
from ..limits import check_attention_request, check_lesson, check_options, check_tokens
from ..schemas.attention import (
    MAX_ABS_VALUE,
    MAX_SEED,
    AttentionRequest,
    AttentionResponse,
    CompareRequest,
    CompareResponse,
    Limits,
    PresetDetail,
    PresetList,
    ScalingLesson,
    SharpnessRowOut,
    VarianceRowOut,
    Vocabulary,
    VocabularyList,
)
from ..settings import Settings
from .common import ERRORS, SettingsDep, json_response

router = APIRouter(prefix="/api", tags=["attention"])


def _trace(body: AttentionRequest) -> AttentionResponse:
    spec = spec_from_request(body)
    return trace_answer(run(spec), spec, body.steps)


def _compare(body: CompareRequest) -> CompareResponse:
    spec = spec_from_options(body, body.tokens_a)
    result = compare(spec, tuple(body.tokens_a), tuple(body.tokens_b))
    spec_b = spec_from_options(body, body.tokens_b)
    return comparison_answer(result, spec, spec_b, body.steps)


@router.post("/attention", response_model=AttentionResponse, responses=ERRORS)
async def attention(body: AttentionRequest, settings: SettingsDep) -> Response:
    """Every step of self- (or cross-) attention on the given tokens."""
    check_attention_request(body, settings)
    keys = len(body.source_tokens or body.tokens)
    work = len(body.tokens) * keys * width_of(body)
    return json_response(await offload(work, _trace, body))


@router.post("/compare", response_model=CompareResponse, responses=ERRORS)
async def compare_sentences(body: CompareRequest, settings: SettingsDep) -> Response:
    """One set of options on two sentences, and how each shared token's vector moved."""
    check_tokens("tokens_a", body.tokens_a, settings)
    check_tokens("tokens_b", body.tokens_b, settings)
    check_options(body, settings)
    work = (len(body.tokens_a) ** 2 + len(body.tokens_b) ** 2) * width_of(body)
    return json_response(await offload(work, _compare, body))


def _expand(body: AttentionRequest) -> AttentionRequest:
    expanded = request_from_spec(expand(spec_from_request(body)))
    return expanded.model_copy(update={"steps": body.steps})


@router.post("/expand", response_model=AttentionRequest, responses=ERRORS)
async def expand_request(body: AttentionRequest, settings: SettingsDep) -> Response:
    """The same request with every number written out: vectors and W matrices, ready to edit."""
    check_attention_request(body, settings)
    work = len(body.tokens) * width_of(body) ** 2
    return json_response(await offload(work, _expand, body))


def published_limits(settings: Settings) -> Limits:
    """The limits a client needs to keep its requests legal (also in each page's initial data)."""
    computed: dict[str, Any] = {
        "max_abs_value": MAX_ABS_VALUE,
        "max_lesson_scores": settings.max_tokens,  # check_lesson bounds scores by MAX_TOKENS
    }
    # Every other limit is the setting of the same name.
    named = {name: getattr(settings, name) for name in Limits.model_fields if name not in computed}
    return Limits(**named, **computed)


@router.get("/limits", response_model=Limits)
async def limits(settings: SettingsDep) -> Response:
    """What this server accepts: request sizes and the scaling lesson's sampling budget."""
    return json_response(published_limits(settings))


@router.get("/presets", response_model=PresetList)
async def list_presets() -> Response:
    """The seed tutorials, one preset per reproducible computation."""
    return json_response(PresetList([preset_summary(p) for p in PRESETS.values()]))


def _preset_detail(name: str) -> PresetDetail:
    preset = get_preset(name)
    return PresetDetail(
        **preset_summary(preset).model_dump(),
        spec=request_from_spec(preset.spec),
        expanded=request_from_spec(expand(preset.spec)),
    )


_PRESET_CACHE: dict[str, bytes] = {}


@router.get("/presets/{name}", response_model=PresetDetail, responses=ERRORS)
async def preset_detail(name: str) -> Response:
    """A preset as written and fully expanded: ready to edit and post to /api/attention."""
    if name not in PRESETS:
        return error_response(
            404,
            ["path", "name"],
            f"unknown preset {name!r}; the presets are {sorted(PRESETS)}",
            "not_found",
        )
    if name not in _PRESET_CACHE:  # presets are constants: expand each once
        _PRESET_CACHE[name] = json_bytes(_preset_detail(name))
    return Response(_PRESET_CACHE[name], media_type="application/json")


@router.get("/vocabularies", response_model=VocabularyList)
async def vocabularies() -> Response:
    """The toy vocabulary of seed 004 and its vectors."""
    words = {w: list(v) for w, v in TOY_VOCABULARY.items()}
    return json_response(VocabularyList([Vocabulary(name="toy", dim=4, words=words)]))


LESSON_CACHE_SIZE = 64
_LESSON_CACHE: dict[bytes, bytes] = {}


def _lesson(
    dims: list[int], trials: int, seed: int, scores: list[float], scales: list[float]
) -> bytes:
    variance = dot_product_variance(dims, trials=trials, seed=seed)
    sharpness = softmax_sharpness(scores, scales)
    lesson = ScalingLesson(
        trials=trials,
        seed=seed,
        variance=[VarianceRowOut(**asdict(row)) for row in variance],
        scores=scores,
        sharpness=[SharpnessRowOut(**asdict(row)) for row in sharpness],
    )
    return json_bytes(lesson)


@router.get("/lessons/scaling", response_model=ScalingLesson, responses=ERRORS)
async def scaling_lesson(
    settings: SettingsDep,
    dims: Annotated[list[int], Query(description="dimensions d_k to sample")] = [  # noqa: B006
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        512,
    ],
    trials: Annotated[int, Query(ge=2)] = 1000,
    seed: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
    scores: Annotated[list[float], Query(description="one query's raw scores")] = [  # noqa: B006
        0.1,
        -0.2,
        0.3,
        -0.2,
        0.5,
    ],
    scales: Annotated[list[float], Query(description="factors applied before softmax")] = [  # noqa: B006
        0.25,
        0.5,
        1,
        2,
        4,
        8,
        16,
    ],
) -> Response:
    """Why divide by sqrt(d_k): variance of q·k by dimension, and softmax sharpening by scale."""
    check_lesson(dims, trials, scores, scales, settings)
    # The lesson is a pure function of its query (seeded), and its defaults cost
    # ~50-150 ms of CPU: keep recent answers, keyed by the exact query.
    key = orjson.dumps([dims, trials, seed, scores, scales])
    body = _LESSON_CACHE.get(key)
    if body is None:
        work = sum(dims) * trials
        body = await offload(work, _lesson, dims, trials, seed, scores, scales)
        _LESSON_CACHE[key] = body
        while len(_LESSON_CACHE) > LESSON_CACHE_SIZE:  # mutated on the event loop only
            del _LESSON_CACHE[next(iter(_LESSON_CACHE))]  # the oldest
    return Response(body, media_type="application/json")
