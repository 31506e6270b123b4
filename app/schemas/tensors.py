"""The one compact-tensor serializer: how an answer's numbers are typed and written.

A route builds its answer from the core's tensors as a pydantic model.  A
field of numbers holds a float32 numpy array (``app.model_payloads.
float_array``), kept as it is (never copied into Python lists) and written by
orjson (``app.json_reply``: shortest exact decimals, -inf as null); a map may
instead be a ``CompactTensorOut`` (base64, ``format: "compact"``).  Its JSON
schema is the shape it documents (``shape``: nested lists of numbers).
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from pydantic import PlainSerializer, PlainValidator, TypeAdapter, WithJsonSchema

FloatArray = npt.NDArray[np.float32]


def _array(value: object) -> FloatArray:
    if not isinstance(value, np.ndarray):
        raise ValueError(f"a float32 numpy array, not {type(value).__name__}")
    return value


def _same(array: FloatArray) -> FloatArray:
    return array  # written by orjson as it is


_MATRIX: dict[str, Any] = TypeAdapter(list[list[float]]).json_schema()
_NULLABLE_MATRIX: dict[str, Any] = TypeAdapter(list[list[float | None]]).json_schema()
_VECTOR: dict[str, Any] = TypeAdapter(list[float]).json_schema()
_CUBE: dict[str, Any] = TypeAdapter(list[list[list[float]]]).json_schema()
_KEEP = PlainValidator(_array)
_WRITE = PlainSerializer(_same, return_type=Any, when_used="always")

# (rows, columns) numbers: a head-score grid (L, H), a layer's hidden states (T, C).
MatrixOut = Annotated[FloatArray, _KEEP, _WRITE, WithJsonSchema(_MATRIX)]
# (rows, columns) with masked cells (-inf in torch) written as null: a head's masked scores.
NullableMatrixOut = Annotated[FloatArray, _KEEP, _WRITE, WithJsonSchema(_NULLABLE_MATRIX)]
# One number per row or per head: a head's sinks' share.
VectorOut = Annotated[FloatArray, _KEEP, _WRITE, WithJsonSchema(_VECTOR)]
# (layers, positions, k) numbers: the logit lens's top probabilities.
CubeOut = Annotated[FloatArray, _KEEP, _WRITE, WithJsonSchema(_CUBE)]
# One layer's maps: (heads, T, S), or (T, S) for a head average or a rollout.
MapsOut = Annotated[
    FloatArray,
    _KEEP,
    _WRITE,
    WithJsonSchema({"anyOf": [_MATRIX, {"type": "array", "items": _MATRIX}]}),
]


def documented_as(documented: Any) -> Any:
    """A float32 array field (kept and written as ``MatrixOut`` is) whose schema is the
    type ``documented``'s, bounds and all (for the toy API's steps)."""
    schema = TypeAdapter(documented).json_schema()
    return Annotated[FloatArray, _KEEP, _WRITE, WithJsonSchema(schema)]
