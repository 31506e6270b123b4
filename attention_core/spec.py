"""A complete description of one attention computation, and the one path that runs it.

Presets and user edits alike are an :class:`AttentionSpec`; :func:`run` turns
any spec into an :class:`AttentionTrace`, and :func:`expand` rewrites a spec
with every seeded or looked-up number written out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Literal

import torch

from .embeddings import (
    EmbeddingSpec,
    ExplicitEmbedding,
    SeededRandomEmbedding,
    VocabularyEmbedding,
    check_finite,
    embed,
)
from .errors import SpecError
from .multihead import (
    AttentionTrace,
    Projections,
    _check_matrix,
    causal_average,
    multi_head_attention,
)
from .projections import (
    ExplicitProjection,
    IdentityProjection,
    ProjectionSpec,
    SeededLinearProjection,
    SeededRandProjection,
    make_projections,
)

Mode = Literal["attention", "causal_average"]
# "sqrt_dk": divide by sqrt(d_k) (the default, as in PyTorch); "none": no scaling;
# a number: multiply the scores by it.
Scale = Literal["sqrt_dk", "none"] | float


@dataclass(frozen=True)
class AttentionSpec:
    """Tokens, where their vectors come from, the projections and the options.

    ``source_tokens`` switches to cross-attention: queries come from
    ``tokens``, keys and values from ``source_tokens`` (embedded with
    ``source_embedding``, or with ``embedding`` when that is None).
    """

    tokens: tuple[str, ...]
    embedding: EmbeddingSpec
    projection: ProjectionSpec = IdentityProjection()
    num_heads: int = 1
    causal: bool = False
    scale: Scale = "sqrt_dk"
    source_tokens: tuple[str, ...] | None = None
    source_embedding: EmbeddingSpec | None = None
    mode: Mode = "attention"


@dataclass(frozen=True)
class Materialized:
    """A spec's tensors: inputs and projection matrices, ready for the math."""

    x: torch.Tensor
    source: torch.Tensor | None
    projections: Projections


def scale_factor(scale: Scale) -> float | None:
    """The core's ``scale`` argument: None means 1/sqrt(d_k)."""
    if scale == "sqrt_dk":
        return None
    if scale == "none":
        return 1.0
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise SpecError(
            f"scale must be 'sqrt_dk', 'none' or a number, got {scale!r}", field="scale"
        )
    value = float(scale)
    if not torch.isfinite(torch.tensor(value)) or value <= 0:
        raise SpecError(f"scale must be a positive finite number, got {scale!r}", field="scale")
    return value


# Seeded embeddings and projections reseed torch's global RNG (as the tutorials do).
_GLOBAL_RNG_LOCK = threading.Lock()


def materialize(spec: AttentionSpec) -> Materialized:
    """Embed the tokens and build the matrices, in the tutorials' RNG order.

    Runs in a forked RNG so that seeding never leaks into the caller's state:
    seed → input embeddings → source embeddings → projections.  The RNG is one
    per process, shared by threads: the lock keeps two threads (a server's
    thread pool) from drawing from each other's seeded stream.
    """
    if not uses_global_rng(spec):  # nothing seeded: no lock, no RNG save/restore
        return _build_tensors(spec)
    with _GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
        return _build_tensors(spec)


def uses_global_rng(spec: AttentionSpec) -> bool:
    """True when building the spec's tensors draws from torch's global RNG."""
    embeddings = (spec.embedding, spec.source_embedding)
    return isinstance(spec.projection, SeededRandProjection | SeededLinearProjection) or any(
        isinstance(e, SeededRandomEmbedding) for e in embeddings
    )


def _build_tensors(spec: AttentionSpec) -> Materialized:
    x = embed(spec.tokens, spec.embedding)
    check_finite("embedding", x)
    source = None
    if spec.source_tokens is not None:
        source = embed(spec.source_tokens, spec.source_embedding or spec.embedding, "source_tokens")
        if source.shape[1] != x.shape[1] and isinstance(spec.projection, IdentityProjection):
            raise SpecError(
                f"source vectors have width {source.shape[1]} but token vectors have width "
                f"{x.shape[1]}; identity projections need equal widths",
                field="source_embedding",
            )
    d_source = None if source is None else source.shape[1]
    projections = make_projections(spec.projection, x.shape[1], d_source)
    return Materialized(x=x, source=source, projections=projections)


def run(spec: AttentionSpec) -> AttentionTrace:
    """Every step of the attention ``spec`` describes."""
    if spec.num_heads < 1:
        raise SpecError(f"num_heads must be at least 1, got {spec.num_heads}", field="num_heads")
    if spec.mode not in ("attention", "causal_average"):
        raise SpecError(
            f"mode must be 'attention' or 'causal_average', got {spec.mode!r}", field="mode"
        )
    factor = scale_factor(spec.scale)
    parts = materialize(spec)
    if spec.mode == "causal_average":
        if spec.source_tokens is not None:
            raise SpecError("causal averaging is self-attention only", field="source_tokens")
        _check_matrix("W_value", parts.projections.W_value, parts.x.shape[1])
        return causal_average(parts.x @ parts.projections.W_value)
    return multi_head_attention(
        parts.x,
        parts.projections,
        num_heads=spec.num_heads,
        source=parts.source,
        is_causal=spec.causal,
        scale=factor,
    )


def _rows(t: torch.Tensor) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in t.tolist())


def expand(spec: AttentionSpec) -> AttentionSpec:
    """The same computation with every number written out.

    Vocabulary look-ups, hashed and seeded vectors become explicit vectors and
    seeded projections explicit matrices; identity stays identity.  ``run`` of
    the result equals ``run`` of ``spec``.
    """
    parts = materialize(spec)
    projection: ProjectionSpec = spec.projection
    if not isinstance(projection, IdentityProjection | ExplicitProjection):
        projection = ExplicitProjection(
            W_query=_rows(parts.projections.W_query),
            W_key=_rows(parts.projections.W_key),
            W_value=_rows(parts.projections.W_value),
        )
    source_embedding = None if parts.source is None else ExplicitEmbedding(_rows(parts.source))
    return replace(
        spec,
        embedding=ExplicitEmbedding(_rows(parts.x)),
        projection=projection,
        source_embedding=source_embedding,
    )


def vocabulary_of(spec: AttentionSpec) -> dict[str, tuple[float, ...]] | None:
    """The words a vocabulary-embedded spec can use, else None."""
    if isinstance(spec.embedding, VocabularyEmbedding):
        return spec.embedding.words()
    return None
