"""Bounds on what a checkpoint may ask for, checked when it is listed, before anything is built.

A ``config.json`` is untrusted: ``n_layer: 1000000`` or ``n_embd: 2**31`` would
make the loader build (or allocate) far more than the machine has, and a float,
a string or a negative number where a size belongs would fail deep inside it.
Here, for every backend alike:

- ``check_config_numbers``: the usual Hugging Face size fields are integers in
  a sane range (``CONFIG_INTEGERS``), token ids are ids;
- ``check_sizes``: the sizes a family read from the config, likewise;
- ``check_model_size``: the parameters the config implies at the least
  (embeddings plus each layer's query and output projections) fit the limit and
  (hand-written families) are there in the safetensors headers, and the memory
  the loaded weights take (as held: ``weight_dtype``) is within ``max_model_bytes``
  (``ATTENTION_VIZ_MAX_MODEL_BYTES``; by default half the machine's memory, see
  ``default_max_model_bytes``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import torch

from ...errors import SpecError
from .safetensors_io import SafetensorsHeader
from .weight_dtype import dtype_name, held_bytes, stored_dtype


class DecoderConfig(Protocol):
    """The sizes every family's config dataclass exposes under these common names."""

    @property
    def num_layers(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def max_positions(self) -> int: ...
    @property
    def vocabulary_size(self) -> int: ...


@dataclass(frozen=True)
class Sizes:
    """What a listing shows of a model, read from its ``config.json`` alone (the listing's
    schema, ``app.schemas.model.ModelSummary``, is built from these fields and their
    ``description`` metadata)."""

    layers: int
    heads: int
    kv_heads: int = field(metadata={"description": "key/value heads (fewer than heads with GQA)"})
    hidden_size: int
    head_dim: int
    max_positions: int = field(metadata={"description": "the model's context, in tokens"})
    vocab_size: int

    @classmethod
    def of(cls, config: DecoderConfig) -> Sizes:
        return cls(
            layers=config.num_layers,
            heads=config.num_heads,
            kv_heads=config.num_kv_heads,
            hidden_size=config.hidden_size,
            head_dim=config.head_dim,
            max_positions=config.max_positions,
            vocab_size=config.vocabulary_size,
        )


MAX_MODEL_BYTES_SETTING = "ATTENTION_VIZ_MAX_MODEL_BYTES"
# Half the memory: the other half is for the activations, the OS and other models.
MODEL_MEMORY_FRACTION = 0.5
FALLBACK_MEMORY_BYTES = 8 * 2**30  # when the machine's memory cannot be read

# Far beyond any published model (the deepest have ~130 layers, the widest a
# 53,248-wide MLP, the largest vocabularies ~260k tokens, contexts ~10M positions).
MAX_LAYERS = 1024
MAX_WIDTH = 2**18
MAX_VOCABULARY = 2**22
MAX_POSITIONS = 2**24

_LAYERS, _WIDTH, _VOCAB, _POSITIONS = (
    (0, MAX_LAYERS),
    (1, MAX_WIDTH),
    (1, MAX_VOCABULARY),
    (1, MAX_POSITIONS),
)
# config.json fields that are sizes, whichever family uses them: (minimum, maximum).
# null is allowed (a default); 0 is allowed where families read it as "the default".
CONFIG_INTEGERS: dict[str, tuple[int, int]] = {
    "n_layer": _LAYERS,
    "num_hidden_layers": _LAYERS,
    "num_layers": _LAYERS,
    "n_embd": _WIDTH,
    "hidden_size": _WIDTH,
    "d_model": _WIDTH,
    "n_head": _WIDTH,
    "num_attention_heads": _WIDTH,
    "num_heads": _WIDTH,
    "num_key_value_heads": (0, MAX_WIDTH),
    "head_dim": (0, MAX_WIDTH),
    "n_inner": (0, MAX_WIDTH),
    "intermediate_size": _WIDTH,
    "d_ff": _WIDTH,
    "vocab_size": _VOCAB,
    "type_vocab_size": (0, MAX_VOCABULARY),
    "n_positions": _POSITIONS,
    "max_position_embeddings": _POSITIONS,
    "sliding_window": (0, MAX_POSITIONS),
}
TOKEN_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id")
_SIZE_BOUNDS = {
    "layers": _LAYERS,
    "heads": _WIDTH,
    "kv_heads": _WIDTH,
    "hidden_size": _WIDTH,
    "head_dim": _WIDTH,
    "max_positions": _POSITIONS,
    "vocab_size": _VOCAB,
}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: object, minimum: int, maximum: int, where: str) -> None:
    """``value`` is an integer (not a bool, not a float) in [minimum, maximum]."""
    if not _is_int(value):
        raise SpecError(f"{where}: {name} is {_short(value)}; it must be an integer", field="model")
    assert isinstance(value, int)
    if not minimum <= value <= maximum:
        raise SpecError(
            f"{where}: {name} is {value}; it must be from {minimum} to {maximum}", field="model"
        )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _is_token_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_VOCABULARY


def check_token_ids(raw: Mapping[str, Any], where: str) -> None:
    """Each of ``TOKEN_ID_FIELDS`` present is null, a token id or a flat list of them."""
    for name in TOKEN_ID_FIELDS:
        value = raw.get(name)
        values: list[object] = value if isinstance(value, list) else [value]
        if value is None or all(_is_token_id(v) for v in values):
            continue
        raise SpecError(
            f"{where}: {name} is {_short(value)}; it must be a token id (an integer from 0) "
            "or a list of them",
            field="model",
        )


def check_config_numbers(raw: Mapping[str, Any], where: str = "config.json") -> None:
    """The size fields of a parsed config (see ``CONFIG_INTEGERS``) and its token ids."""
    for name, (minimum, maximum) in CONFIG_INTEGERS.items():
        if raw.get(name) is not None:
            check_int(name, raw[name], minimum, maximum, where)
    check_token_ids(raw, where)


def check_sizes(sizes: Sizes) -> None:
    """What a family read from the config: integers within the same bounds."""
    for f in fields(sizes):
        if f.name in _SIZE_BOUNDS:
            minimum, maximum = _SIZE_BOUNDS[f.name]
            check_int(f.name, getattr(sizes, f.name), minimum, maximum, "config.json")


def implied_parameters(sizes: Sizes) -> int:
    """The fewest parameters a model of these sizes has: the token embeddings, and in every
    layer a query and an output projection (hidden × heads·head_dim each)."""
    attention = 2 * sizes.hidden_size * sizes.heads * sizes.head_dim
    return sizes.vocab_size * sizes.hidden_size + sizes.layers * attention


def _bytes(count: int) -> str:
    return f"{count:,} bytes" if count < 10**7 else f"{count / 1e6:,.0f} MB"


class ModelTooLarge(SpecError):
    """The weights, as held, exceed ``max_model_bytes`` (``placement`` may still run them).

    ``held``: the bytes they take; ``dtype``: the dtype they are held in."""

    def __init__(self, message: str, held: int, dtype: torch.dtype) -> None:
        super().__init__(message, field="model")
        self.held = held
        self.dtype = dtype


def check_model_size(
    sizes: Sizes,
    headers: Iterable[SafetensorsHeader],
    max_model_bytes: int,
    *,
    dtype: torch.dtype | None = None,
    weights_match_sizes: bool = True,
) -> int:
    """The bytes the weights take once loaded, held as ``dtype`` (None: as stored, see
    ``weight_dtype``), after checking: the headers hold at least the parameters the config
    implies, and those and the held bytes fit ``max_model_bytes`` (else ``ModelTooLarge``).

    ``weights_match_sizes``: the family stores one set of weights per layer, full
    width (the hand-written ones).  Other architectures may not (ALBERT shares one
    layer's weights, factorizes its embeddings): for them only the bytes are checked.
    """
    headers = list(headers)
    implied = implied_parameters(sizes)
    count = sum(h.parameters for h in headers)
    if weights_match_sizes and count < implied:
        raise SpecError(
            f"config.json implies at least {implied:,} parameters ({sizes.layers} layers of "
            f"width {sizes.hidden_size}); the weights hold {count:,}",
            field="model",
        )
    held_as = dtype or stored_dtype(headers)
    shown = dtype_name(held_as) + ("" if dtype else ", as stored")
    limit = f"the limit is {_bytes(max_model_bytes)} ({MAX_MODEL_BYTES_SETTING})"
    least = implied * held_as.itemsize
    if least > max_model_bytes:
        raise ModelTooLarge(
            f"config.json implies at least {implied:,} parameters ({_bytes(least)} as "
            f"{shown}); {limit}",
            least,
            held_as,
        )
    needed = held_bytes(headers, dtype)
    if needed > max_model_bytes:
        raise ModelTooLarge(
            f"the weights take {_bytes(needed)} once loaded ({shown}); {limit}", needed, held_as
        )
    return needed


# --- the default limit ------------------------------------------------------------------

_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def machine_memory() -> int | None:
    """Physical memory, or the container's memory limit when that is lower (None: unknown)."""
    found: list[int] = []
    try:
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.isdigit() and int(text) < 2**60:  # "max" or a huge number: no limit
            found.append(int(text))
    positive = [n for n in found if n > 0]
    return min(positive) if positive else None


def default_max_model_bytes() -> int:
    """``MODEL_MEMORY_FRACTION`` of ``machine_memory()`` (of 8 GB when it cannot be read)."""
    return int((machine_memory() or FALLBACK_MEMORY_BYTES) * MODEL_MEMORY_FRACTION)
