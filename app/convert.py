"""Translate between the API's pydantic bodies and attention_core's dataclasses.

Traces go out as numpy float32 arrays, serialized by orjson: each number is
written as the shortest decimal that reads back to the same float32, and the
−inf of masked scores becomes ``null``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any, cast

import numpy as np

from attention_core import (
    AttentionSpec,
    AttentionTrace,
    Comparison,
    ExplicitEmbedding,
    ExplicitProjection,
    HashedEmbedding,
    IdentityProjection,
    Preset,
    SeededLinearProjection,
    SeededRandomEmbedding,
    SeededRandProjection,
    VocabularyEmbedding,
)
from attention_core.embeddings import EmbeddingSpec
from attention_core.projections import ProjectionSpec

from .schemas.attention import (
    AttentionOptions,
    AttentionRequest,
    AttentionResponse,
    CompareResponse,
    EmbeddingIn,
    ExplicitEmbeddingIn,
    ExplicitProjectionIn,
    HashedEmbeddingIn,
    HeadTrace,
    IdentityProjectionIn,
    PresetSummary,
    ProjectionIn,
    SeededLinearProjectionIn,
    SeededRandomEmbeddingIn,
    SeededRandProjectionIn,
    SharedTokenOut,
    Strict,
    VocabularyEmbeddingIn,
)
from .steps import HEAD_STEPS, STEP_NAMES


def _rows(matrix: Iterable[Iterable[float]]) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(row) for row in matrix)


def embedding_to_core(e: EmbeddingIn) -> EmbeddingSpec:
    if isinstance(e, VocabularyEmbeddingIn):
        return VocabularyEmbedding(extra={w: tuple(v) for w, v in e.extra.items()})
    if isinstance(e, ExplicitEmbeddingIn):
        return ExplicitEmbedding(_rows(e.vectors))
    if isinstance(e, SeededRandomEmbeddingIn):
        return SeededRandomEmbedding(
            dim=e.dim, seed=e.seed, batch=e.batch, batch_index=e.batch_index
        )
    return HashedEmbedding(dim=e.dim, seed=e.seed)


def projection_to_core(p: ProjectionIn) -> ProjectionSpec:
    if isinstance(p, IdentityProjectionIn):
        return IdentityProjection()
    if isinstance(p, ExplicitProjectionIn):
        return ExplicitProjection(
            W_query=_rows(p.W_query),
            W_key=_rows(p.W_key),
            W_value=_rows(p.W_value),
            W_out=None if p.W_out is None else _rows(p.W_out),
        )
    kind = SeededRandProjection if isinstance(p, SeededRandProjectionIn) else SeededLinearProjection
    return kind(d_out=p.d_out, seed=p.seed, order=tuple(p.order))


# The options that the API body and the core spec carry under one name with one value.
_SAME_OPTIONS = ("num_heads", "causal", "scale", "mode")


def _same_options(source: AttentionOptions | AttentionSpec) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _SAME_OPTIONS}


def spec_from_options(options: AttentionOptions, tokens: list[str]) -> AttentionSpec:
    return AttentionSpec(
        tokens=tuple(tokens),
        embedding=embedding_to_core(options.embedding),
        projection=projection_to_core(options.projection),
        **_same_options(options),
    )


def spec_from_request(body: AttentionRequest) -> AttentionSpec:
    spec = spec_from_options(body, body.tokens)
    if body.source_tokens is None:
        return spec
    source_embedding = (
        None if body.source_embedding is None else embedding_to_core(body.source_embedding)
    )
    return replace(spec, source_tokens=tuple(body.source_tokens), source_embedding=source_embedding)


# The API body of each core spec: its fields carry the spec's names.
_BODIES: dict[type, type[Strict]] = {
    VocabularyEmbedding: VocabularyEmbeddingIn,
    ExplicitEmbedding: ExplicitEmbeddingIn,
    SeededRandomEmbedding: SeededRandomEmbeddingIn,
    HashedEmbedding: HashedEmbeddingIn,
    IdentityProjection: IdentityProjectionIn,
    ExplicitProjection: ExplicitProjectionIn,
    SeededRandProjection: SeededRandProjectionIn,
    SeededLinearProjection: SeededLinearProjectionIn,
}


def embedding_from_core(e: EmbeddingSpec) -> EmbeddingIn:
    return cast(EmbeddingIn, _BODIES[type(e)].model_validate(e, from_attributes=True))


def projection_from_core(p: ProjectionSpec) -> ProjectionIn:
    return cast(ProjectionIn, _BODIES[type(p)].model_validate(p, from_attributes=True))


def request_from_spec(spec: AttentionSpec) -> AttentionRequest:
    """The API body that describes ``spec`` (for GET /api/presets/{name}), every field set
    (an answer writes the fields it was given: the defaults too, each kind named)."""
    written = AttentionRequest(
        tokens=list(spec.tokens),
        embedding=embedding_from_core(spec.embedding),
        projection=projection_from_core(spec.projection),
        **_same_options(spec),
        source_tokens=None if spec.source_tokens is None else list(spec.source_tokens),
        source_embedding=None
        if spec.source_embedding is None
        else embedding_from_core(spec.source_embedding),
    )
    return AttentionRequest.model_validate(written.model_dump())


def _array(t: Any) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy(), dtype=np.float32)


def trace_answer(
    trace: AttentionTrace,
    spec: AttentionSpec,
    steps: Iterable[str] | None = None,
) -> AttentionResponse:
    """The AttentionResponse of a trace: its steps as float32 arrays (written by orjson)."""
    wanted = set(STEP_NAMES if steps is None else steps)
    heads: list[dict[str, Any]] = [{} for _ in range(trace.num_heads)]
    for name in HEAD_STEPS:
        if name in wanted:
            stacked = _array(getattr(trace, name))  # (H, rows, cols)
            for h in range(trace.num_heads):
                heads[h][name] = stacked[h]
    source_tokens = spec.source_tokens if spec.source_tokens is not None else spec.tokens
    shapes = {name: list(getattr(trace, name).shape) for name in _SHAPES}
    return AttentionResponse(
        tokens=list(spec.tokens),
        source_tokens=list(source_tokens),
        mode=spec.mode,
        num_heads=trace.num_heads,
        causal=trace.causal,
        cross=trace.cross,
        scale=trace.scale,
        shapes=shapes,
        x=_array(trace.x) if "x" in wanted else None,
        source=_array(trace.source) if "x" in wanted else None,
        heads=[HeadTrace(**head) for head in heads],
        output=_array(trace.output) if "output" in wanted else None,
    )


_SHAPES = ("x", "source", "q", "k", "v", "attn_weights", "context_vec", "output")


def trace_to_json(
    trace: AttentionTrace,
    spec: AttentionSpec,
    steps: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The AttentionResponse body as plain dicts and float32 arrays (for orjson)."""
    return trace_answer(trace, spec, steps).model_dump(exclude_unset=True)


def comparison_answer(
    comparison: Comparison,
    spec_a: AttentionSpec,
    spec_b: AttentionSpec,
    steps: Iterable[str] | None,
) -> CompareResponse:
    return CompareResponse(
        a=trace_answer(comparison.trace_a, spec_a, steps),
        b=trace_answer(comparison.trace_b, spec_b, steps),
        shared=[SharedTokenOut(**asdict(s)) for s in comparison.shared],
    )


def preset_summary(preset: Preset) -> PresetSummary:
    return PresetSummary(
        name=preset.name,
        title=preset.title,
        description=preset.description,
        source=preset.source,
        compare_tokens=None if preset.compare_tokens is None else list(preset.compare_tokens),
    )
