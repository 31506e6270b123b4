"""Run one spec on two sentences and measure how shared words moved.

The point of the river/finance example: "bank" enters both sentences with the
same vector and leaves with different context vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .multihead import AttentionTrace
from .spec import AttentionSpec, run


@dataclass(frozen=True)
class SharedToken:
    """One token found in both sentences (its first position in each)."""

    token: str
    position_a: int
    position_b: int
    input_cosine: float
    input_distance: float
    output_cosine: float
    output_distance: float


@dataclass(frozen=True)
class Comparison:
    trace_a: AttentionTrace
    trace_b: AttentionTrace
    shared: tuple[SharedToken, ...]


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity; 0.0 when either vector is zero (no direction to compare)."""
    norms = a.norm() * b.norm()
    if float(norms) == 0.0:
        return 0.0
    return float((a @ b) / norms)


def compare(
    spec: AttentionSpec, tokens_a: tuple[str, ...], tokens_b: tuple[str, ...]
) -> Comparison:
    """Traces of ``spec`` on both sentences and the shift of every shared token.

    Explicit embeddings are per position, so they only make sense here when
    the caller supplies a spec per sentence; vocabulary, hashed and seeded
    embeddings re-embed each sentence.
    """
    trace_a = run(replace(spec, tokens=tokens_a))
    trace_b = run(replace(spec, tokens=tokens_b))
    first_b: dict[str, int] = {}
    for j, token in enumerate(tokens_b):
        first_b.setdefault(token, j)
    shared = []
    seen = set()
    for i, token in enumerate(tokens_a):
        if token in first_b and token not in seen:
            seen.add(token)
            j = first_b[token]
            xa, xb = trace_a.x[i], trace_b.x[j]
            oa, ob = trace_a.output[i], trace_b.output[j]
            shared.append(
                SharedToken(
                    token=token,
                    position_a=i,
                    position_b=j,
                    input_cosine=cosine(xa, xb),
                    input_distance=float((xa - xb).norm()),
                    output_cosine=cosine(oa, ob),
                    output_distance=float((oa - ob).norm()),
                )
            )
    return Comparison(trace_a=trace_a, trace_b=trace_b, shared=tuple(shared))
