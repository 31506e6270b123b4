"""A compact wire format for attention weights: 1 or 2 bytes per weight, base64.

``uint8``: ``byte = round(weight * 255)``, decoded as ``byte / 255``.  Weights
lie in [0, 1], so the round-trip error is at most half a step, 1/510
(≈ 0.00196).  ``float16``: IEEE 754 binary16, little-endian, relative error
≤ 2^-11 (absolute ≤ 2^-12 for weights in [0.5, 1], smaller below).

Values are in C (row-major) order over ``shape``: for one layer (H, T, T),
value [h, i, j] sits at index ``(h * T + i) * T + j``.  In JavaScript::

    const bytes = Uint8Array.from(atob(data), c => c.charCodeAt(0));
    // uint8:   const w = Float32Array.from(bytes, b => b / 255);
    // float16: const w = new Float16Array(bytes.buffer);  // or decode by hand
"""

from __future__ import annotations

import base64
import sys
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from ...errors import SpecError

CompactDtype = Literal["uint8", "float16"]
COMPACT_DTYPES: tuple[str, ...] = ("uint8", "float16")
UINT8_MAX_ABS_ERROR = 1.0 / 510.0

DECODE_DESCRIPTION: dict[str, dict[str, object]] = {
    "uint8": {
        "encoding": "base64",
        "dtype": "uint8",
        "bytes_per_value": 1,
        "order": "C (row-major) over shape",
        "decode": "value = byte / 255",
        "max_abs_error": UINT8_MAX_ABS_ERROR,
    },
    "float16": {
        "encoding": "base64",
        "dtype": "float16",
        "bytes_per_value": 2,
        "byte_order": "little",
        "order": "C (row-major) over shape",
        "decode": "IEEE 754 binary16, little-endian (Float16Array)",
        "max_abs_error": 2.0**-12,
    },
}


@dataclass(frozen=True)
class CompactTensor:
    """A base64-encoded tensor plus what a client needs to decode it."""

    dtype: str
    shape: tuple[int, ...]
    data: str

    def describe(self) -> dict[str, object]:
        return {"shape": list(self.shape), "data": self.data, **DECODE_DESCRIPTION[self.dtype]}


def encode_compact(weights: torch.Tensor, dtype: str = "uint8") -> CompactTensor:
    """Quantize weights in [0, 1] and base64 them.  Shapes: any -> same ``shape``."""
    if dtype not in COMPACT_DTYPES:
        raise SpecError(
            f"compact dtype {dtype!r} is not one of {', '.join(COMPACT_DTYPES)}", field="dtype"
        )
    with torch.inference_mode():
        if dtype == "uint8":
            raw = (weights * 255.0).round_().clamp_(0, 255).to(torch.uint8)
            payload = raw.contiguous().numpy().tobytes()
        else:
            array = weights.to(torch.float16).contiguous().numpy()
            if sys.byteorder != "little":
                array = array.byteswap()
            payload = array.tobytes()
    return CompactTensor(dtype, tuple(weights.shape), base64.b64encode(payload).decode("ascii"))


def decode_compact(compact: CompactTensor) -> torch.Tensor:
    """The inverse of ``encode_compact`` (float32), as a client would compute it."""
    payload = base64.b64decode(compact.data)
    if compact.dtype == "uint8":
        array = np.frombuffer(payload, dtype=np.uint8).astype(np.float32) / 255.0
    elif compact.dtype == "float16":
        array = np.frombuffer(payload, dtype="<f2").astype(np.float32)
    else:
        raise SpecError(f"compact dtype {compact.dtype!r} is unknown", field="dtype")
    return torch.from_numpy(array.reshape(compact.shape))
