"""Where W_query, W_key and W_value come from: projections are data too.

Seeded kinds reproduce the tutorials exactly, so they state the seed and the
order in which the three matrices are created (the RNG is consumed in that
order).  ``seed=None`` continues the RNG stream left by a seeded embedding,
as seeds 000 and 003 do (``x = torch.randn(...)`` then ``nn.Linear`` layers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from .embeddings import matrix_from_rows
from .errors import SpecError
from .multihead import Projections

Role = Literal["query", "key", "value"]
ROLES: tuple[Role, ...] = ("query", "key", "value")


@dataclass(frozen=True)
class IdentityProjection:
    """No projection: q = k = v = x (seed 004's first step)."""


@dataclass(frozen=True)
class ExplicitProjection:
    """Matrices given outright, each (d_in, d_out) and applied as ``x @ W``."""

    W_query: tuple[tuple[float, ...], ...]
    W_key: tuple[tuple[float, ...], ...]
    W_value: tuple[tuple[float, ...], ...]
    W_out: tuple[tuple[float, ...], ...] | None = None


@dataclass(frozen=True)
class SeededRandProjection:
    """``torch.manual_seed(seed)`` then ``torch.rand(d_in, d_out)`` per role, in ``order``."""

    d_out: int
    seed: int | None = 123
    order: tuple[Role, ...] = ROLES


@dataclass(frozen=True)
class SeededLinearProjection:
    """``torch.manual_seed(seed)`` then ``nn.Linear(d_in, d_out, bias=False)`` per role.

    The roles are created in ``order``.

    W is the layer's weight transposed, so ``x @ W`` equals ``layer(x)``.
    """

    d_out: int
    seed: int | None = 789
    order: tuple[Role, ...] = ROLES


ProjectionSpec = (
    IdentityProjection | ExplicitProjection | SeededRandProjection | SeededLinearProjection
)


def _check_order(order: Sequence[str]) -> None:
    if sorted(order) != sorted(ROLES):
        raise SpecError(
            f"projection order must name query, key and value once each, got {list(order)}",
            field="projection.order",
        )


def _check_d_out(d_out: int) -> None:
    if d_out < 1:
        raise SpecError(
            f"projection d_out must be at least 1, got {d_out}", field="projection.d_out"
        )


def make_projections(spec: ProjectionSpec, d_in: int, d_source: int | None = None) -> Projections:
    """The matrices of ``spec`` for inputs of width ``d_in``.

    ``d_source`` is the width of the keys' and values' input in cross-attention
    (default ``d_in``): seeded W_key and W_value get that many rows.
    Seeded kinds draw from the global RNG; call inside ``torch.random.fork_rng``.
    """
    if isinstance(spec, IdentityProjection):
        eye = torch.eye(d_in)
        return Projections(W_query=eye, W_key=eye, W_value=eye)
    if isinstance(spec, ExplicitProjection):
        w_out = None if spec.W_out is None else matrix_from_rows("projection.W_out", spec.W_out)
        return Projections(
            W_query=matrix_from_rows("projection.W_query", spec.W_query),
            W_key=matrix_from_rows("projection.W_key", spec.W_key),
            W_value=matrix_from_rows("projection.W_value", spec.W_value),
            W_out=w_out,
        )
    if isinstance(spec, SeededRandProjection | SeededLinearProjection):
        _check_order(spec.order)
        _check_d_out(spec.d_out)
        if spec.seed is not None:
            torch.manual_seed(spec.seed)
        made: dict[str, torch.Tensor] = {}
        for role in spec.order:
            rows = d_in if role == "query" or d_source is None else d_source
            if isinstance(spec, SeededRandProjection):
                made[role] = torch.rand(rows, spec.d_out)
            else:
                made[role] = nn.Linear(rows, spec.d_out, bias=False).weight.detach().T.contiguous()
        return Projections(W_query=made["query"], W_key=made["key"], W_value=made["value"])
    raise SpecError(f"unknown projection kind {type(spec).__name__}", field="projection")
