"""The "why divide by sqrt(d_k)" lesson as numbers.

Two effects: the dot product of two random unit-variance vectors has variance
d_k, which the scaling brings back to about 1; and multiplying scores by a
larger factor pushes softmax toward a one-hot vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .attention import attention_with_steps
from .errors import SpecError


@dataclass(frozen=True)
class VarianceRow:
    dim: int
    variance_unscaled: float
    variance_scaled: float


@dataclass(frozen=True)
class SharpnessRow:
    scale: float
    weights: tuple[float, ...]
    max_weight: float
    entropy: float


def dot_product_variance(
    dims: Sequence[int], trials: int = 1000, seed: int = 0
) -> list[VarianceRow]:
    """Sample variance of q·k and of q·k/sqrt(d) for q, k ~ N(0, I_d).

    Seeded, so the same arguments give the same figures everywhere.  The
    population variance (dividing by ``trials``) is used, as NumPy's ``var``.
    """
    if trials < 2:
        raise SpecError(f"trials must be at least 2, got {trials}", field="trials")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for dim in dims:
        if dim < 1:
            raise SpecError(f"dimensions must be at least 1, got {dim}", field="dims")
        q = torch.randn(trials, dim, generator=generator, dtype=torch.float64)
        k = torch.randn(trials, dim, generator=generator, dtype=torch.float64)
        dots = (q * k).sum(dim=1)
        scaled = dots / math.sqrt(dim)
        rows.append(
            VarianceRow(
                dim=dim,
                variance_unscaled=float(dots.var(correction=0)),
                variance_scaled=float(scaled.var(correction=0)),
            )
        )
    return rows


def softmax_sharpness(scores: Sequence[float], scales: Sequence[float]) -> list[SharpnessRow]:
    """softmax(scale * scores) for each scale, with its largest weight and entropy (nats).

    The softmax is the core's own: a single query whose scores are ``scores``.
    """
    if len(scores) == 0:
        raise SpecError("scores is empty", field="scores")
    raw = torch.tensor([list(scores)], dtype=torch.float32)  # (1, S) as one query's scores
    if not bool(torch.isfinite(raw).all()):
        raise SpecError("scores contains NaN or infinite values", field="scores")
    rows = []
    for scale in scales:
        if not math.isfinite(scale) or scale < 0:
            raise SpecError(f"scales must be finite and non-negative, got {scale}", field="scales")
        # Scores enter as query·key with a one-hot key basis: q = scores, K = I.
        steps = attention_with_steps(
            raw, torch.eye(raw.shape[1]), torch.eye(raw.shape[1]), scale=scale
        )
        weights = steps.attn_weights[0]
        entropy = float(-(weights * torch.log(weights.clamp_min(1e-30))).sum())
        rows.append(
            SharpnessRow(
                scale=float(scale),
                weights=tuple(float(w) for w in weights),
                max_weight=float(weights.max()),
                entropy=entropy,
            )
        )
    return rows
