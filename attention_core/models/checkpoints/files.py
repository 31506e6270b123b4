"""What every family does with a checkpoint directory: read ``config.json`` (bounded, see
``untrusted_json``), check the weights against the model they must fill, write both back
in transformers' layout."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...errors import SpecError
from .safetensors_io import save_safetensors
from .untrusted_json import read_json

__all__ = [
    "CONFIG_FILE",
    "GENERATION_CONFIG_FILE",
    "TOKENIZER_FILE",
    "WEIGHTS_FILE",
    "check_supported",
    "matched_state",
    "read_config",
    "read_json",
    "write_checkpoint",
]

# The files of a checkpoint directory in Hugging Face's layout.
CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
TOKENIZER_FILE = "tokenizer.json"
WEIGHTS_FILE = "model.safetensors"


def check_supported(name: str, value: object, supported: Collection[str], field: str) -> None:
    """A ``SpecError`` naming the value and the supported ones unless it is one of them
    (a config's activation, say)."""
    if value not in supported:
        raise SpecError(
            f"{name} {value!r} is not supported; use one of {', '.join(supported)}", field=field
        )


def read_config(directory: Path) -> dict[str, Any]:
    """``directory/config.json`` as a dict; a ``SpecError`` naming the directory otherwise."""
    return read_json(directory / CONFIG_FILE)


def matched_state(
    directory: Path, model: nn.Module, state: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """``state`` checked name by name and shape by shape against ``model`` (which may live
    on the meta device), every tensor untouched: still memory-mapped, in its stored dtype
    (``weight_dtype`` runs 16-bit weights in float32)."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise SpecError(
            f"{directory.name}: the weights do not match config.json "
            f"(missing: {', '.join(missing[:5]) or 'none'}; "
            f"unexpected: {', '.join(unexpected[:5]) or 'none'})",
            field="model",
        )
    for name, shape in expected.items():
        if tuple(state[name].shape) != shape:
            raise SpecError(
                f"{directory.name}: tensor {name!r} has shape {tuple(state[name].shape)}; "
                f"config.json implies {shape}",
                field="model",
            )
    return state


def write_checkpoint(
    directory: Path,
    state: Mapping[str, torch.Tensor],
    config: Mapping[str, Any],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """``model.safetensors`` and ``config.json`` in ``directory`` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    save_safetensors(directory / WEIGHTS_FILE, state, {"format": "pt", **(metadata or {})})
    text = json.dumps(dict(config), indent=2, sort_keys=True) + "\n"
    (directory / CONFIG_FILE).write_text(text, encoding="utf-8")
