"""Where token vectors come from: embeddings are data, described by a spec.

Four sources: the toy vocabulary of seed 004 (plus words a user adds),
explicit vectors, seeded random vectors generated the way seeds 000/003 do
(``torch.randn(B, T, C)`` after ``torch.manual_seed``), and hashed vectors, one
fixed vector per distinct token string.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import torch

from .errors import SpecError

# Seed 004's four-dimensional toy vocabulary.
TOY_VOCABULARY: Mapping[str, tuple[float, ...]] = MappingProxyType(
    {
        "stream": (1.2, 0.0, 0.0, 0.3),
        "mud": (0.9, 0.0, 0.0, 0.9),
        "money": (0.0, 1.4, 0.0, 0.1),
        "loan": (0.0, 1.1, 0.0, 0.6),
        "bank": (0.8, 0.8, 0.2, 0.0),
    }
)


@dataclass(frozen=True)
class VocabularyEmbedding:
    """Look tokens up in the toy vocabulary; ``extra`` adds or overrides words."""

    extra: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def words(self) -> dict[str, tuple[float, ...]]:
        return {**TOY_VOCABULARY, **{w: tuple(v) for w, v in self.extra.items()}}


@dataclass(frozen=True)
class ExplicitEmbedding:
    """One vector per token position, given outright."""

    vectors: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class SeededRandomEmbedding:
    """``torch.manual_seed(seed); torch.randn(batch, T, dim)[batch_index]``.

    With batch=4 and seed 1337 this is exactly the ``x`` of seeds 000 and 003
    (their first batch element).  The RNG stream continues into any seeded
    projection that asks for ``seed=None``, as it does in those tutorials.
    """

    dim: int
    seed: int = 1337
    batch: int = 1
    batch_index: int = 0


@dataclass(frozen=True)
class HashedEmbedding:
    """A fixed ``randn(dim)`` vector per distinct token string.

    The same word gets the same vector in every sentence, which is what a
    comparison across contexts needs; the vector is seeded from a hash of
    (seed, token), so it is stable across processes and machines.
    """

    dim: int = 8
    seed: int = 0


EmbeddingSpec = VocabularyEmbedding | ExplicitEmbedding | SeededRandomEmbedding | HashedEmbedding


def check_finite(name: str, t: torch.Tensor) -> None:
    if not bool(torch.isfinite(t).all()):
        raise SpecError(f"{name} contains NaN or infinite values", field=name)


def matrix_from_rows(name: str, rows: Sequence[Sequence[float]]) -> torch.Tensor:
    """A float32 (rows, cols) tensor from nested lists, rejecting ragged or empty input."""
    if len(rows) == 0:
        raise SpecError(f"{name} is empty", field=name)
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise SpecError(
            f"{name} is ragged: its rows have lengths {sorted(widths)}; all must be equal",
            field=name,
        )
    if widths == {0}:
        raise SpecError(f"{name} has rows of length 0", field=name)
    for row in rows:
        for value in row:
            if isinstance(value, float) and not math.isfinite(value):
                raise SpecError(f"{name} contains NaN or infinite values", field=name)
    t = torch.tensor([list(r) for r in rows], dtype=torch.float32)
    check_finite(name, t)
    return t


def _hashed_vector(token: str, dim: int, seed: int) -> torch.Tensor:
    digest = hashlib.blake2b(f"{seed}\x00{token}".encode(), digest_size=8).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)
    return torch.randn(dim, generator=generator)


def _vocabulary_rows(
    tokens: Sequence[str], spec: VocabularyEmbedding, field_name: str
) -> torch.Tensor:
    """Each token's vector from the vocabulary (every token known, the vectors one length)."""
    words = spec.words()
    unknown = [t for t in dict.fromkeys(tokens) if t not in words]
    if unknown:
        raise SpecError(
            f"unknown word(s) {unknown} in {field_name}; the vocabulary has "
            f"{sorted(words)} (add a vector for a new word, or use hashed embeddings)",
            field=field_name,
            # where the first one is and how many there are (the words are in msg)
            ctx={
                "index": list(tokens).index(unknown[0]),
                "found": len(unknown),
                "vocabulary_size": len(words),
            },
        )
    dims = {len(v) for v in words.values()}
    if len(dims) != 1:
        raise SpecError(
            f"vocabulary vectors must all have the same length, got lengths {sorted(dims)}",
            field="embedding.extra",
        )
    return matrix_from_rows("embedding.extra", [words[t] for t in tokens])


def embed(tokens: Sequence[str], spec: EmbeddingSpec, field_name: str = "tokens") -> torch.Tensor:
    """The (T, d) input matrix for ``tokens``.

    Seeded random embeddings draw from the global RNG after seeding it, so the
    caller decides the RNG context (see ``spec.materialize``).
    """
    if len(tokens) == 0:
        raise SpecError(f"{field_name} is empty: give at least one token", field=field_name)
    if isinstance(spec, VocabularyEmbedding):
        return _vocabulary_rows(tokens, spec, field_name)
    if isinstance(spec, ExplicitEmbedding):
        if len(spec.vectors) != len(tokens):
            raise SpecError(
                f"{len(spec.vectors)} vectors given for {len(tokens)} tokens; "
                "give exactly one vector per token",
                field="embedding.vectors",
            )
        return matrix_from_rows("embedding.vectors", spec.vectors)
    if isinstance(spec, SeededRandomEmbedding):
        if spec.dim < 1:
            raise SpecError(
                f"embedding dim must be at least 1, got {spec.dim}", field="embedding.dim"
            )
        if not 0 <= spec.batch_index < spec.batch:
            raise SpecError(
                f"batch_index ({spec.batch_index}) must be in [0, batch={spec.batch})",
                field="embedding.batch_index",
            )
        torch.manual_seed(spec.seed)
        return torch.randn(spec.batch, len(tokens), spec.dim)[spec.batch_index]
    if isinstance(spec, HashedEmbedding):
        if spec.dim < 1:
            raise SpecError(
                f"embedding dim must be at least 1, got {spec.dim}", field="embedding.dim"
            )
        return torch.stack([_hashed_vector(t, spec.dim, spec.seed) for t in tokens])
    raise SpecError(f"unknown embedding kind {type(spec).__name__}", field="embedding")
