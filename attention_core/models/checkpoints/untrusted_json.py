"""JSON from checkpoint files (``config.json``, ``generation_config.json``, shard
indexes, safetensors headers), which are untrusted: bounded before it is parsed.

Python's parser recurses once per nesting level (100,000 ``[`` raise
``RecursionError``), reads ``1e999`` as ``inf`` (which ``int()`` turns into
``OverflowError``) and integers of any length (which orjson cannot write back).
So: the text is at most ``max_bytes``, nested at most ``MAX_JSON_DEPTH`` levels
(counted before parsing), numbers are finite, integers fit in 64 bits, and
every failure is a ``SpecError`` naming the file.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ...errors import SpecError

# config.json and a shard index are kilobytes; a safetensors header has its own bound.
MAX_JSON_BYTES = 16 * 2**20
# Hugging Face configs nest 3-4 levels (rope_scaling, text_config, lists of ids).
MAX_JSON_DEPTH = 32
INT64_MAX = 2**63 - 1

# A JSON string (escapes included), unrolled so the regex runs in linear time.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def nesting_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``text`` nests arrays and objects (strings skipped); stops past ``limit``."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is too large for a float")
    return value


def _int64(text: str) -> int:
    value = int(text)
    if abs(value) > INT64_MAX:
        raise ValueError(f"the integer {text[:24]}… does not fit in 64 bits")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` parsed, or a ``SpecError``: ``what`` (e.g. "x.json is not valid JSON"), then why."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        depth = nesting_depth(text, max_depth)
        if depth > max_depth:
            raise ValueError(f"it nests more than {max_depth} levels deep")
        return json.loads(text, parse_float=_finite, parse_int=_int64, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise SpecError(f"{what} ({exc})", field="model") from exc


def read_json(path: Path, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """A JSON object from ``path``; a ``SpecError`` naming the directory and file if it is not
    one, is larger than ``max_bytes``, or breaks a bound above."""
    what = f"{path.parent.name}: {path.name}"
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise SpecError(
            f"{path.parent.name}: cannot read {path.name} ({exc.strerror or exc})", field="model"
        ) from exc
    if len(data) > max_bytes:
        raise SpecError(f"{what} is larger than {max_bytes} bytes", field="model")
    raw = parse_json(data, f"{path.parent.name}: cannot read {path.name}: it is not valid JSON")
    if not isinstance(raw, dict):
        raise SpecError(f"{what} is not a JSON object", field="model")
    return raw
