"""The model families this package implements, and which one a ``config.json`` belongs to.

A family is its ``model_type`` values, whether it is causal, how to read its
sizes from ``config.json`` (refusing what the forward pass does not
implement) and how to load a checkpoint.  Adding a family is one entry in
``FAMILIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .bert import Encoder, EncoderConfig
from .decoder import decoder_loader
from .gpt2 import GPT2, GPT2Config
from .protocols import DecoderConfig, TextModel

# (directory, name, max_tokens, cache_bytes) -> a loaded model
Loader = Callable[[Path, str, int, int], TextModel]

# Encoder-decoder model types (cross-attention between two stacks): listed, never loaded.
ENCODER_DECODER_TYPES = frozenset(
    {
        "t5",
        "mt5",
        "umt5",
        "bart",
        "mbart",
        "marian",
        "pegasus",
        "pegasus_x",
        "blenderbot",
        "blenderbot-small",
        "led",
        "prophetnet",
        "m2m_100",
        "nllb-moe",
        "fsmt",
        "whisper",
        "encoder-decoder",
        "longt5",
        "switch_transformers",
    }
)


@dataclass(frozen=True)
class Sizes:
    """What a listing shows of a model, read from its ``config.json`` alone."""

    layers: int
    heads: int
    kv_heads: int
    hidden_size: int
    head_dim: int
    max_positions: int
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


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    causal: bool
    sizes: Callable[[Mapping[str, Any]], Sizes]  # raises SpecError for what is not implemented
    load: Loader


def _bert_sizes(raw: Mapping[str, Any]) -> Sizes:
    return Sizes.of(EncoderConfig.from_dict(dict(raw), name=""))


def _load_bert(directory: Path, name: str, max_tokens: int, cache_bytes: int) -> TextModel:
    return Encoder.from_dir(directory, max_tokens=max_tokens, cache_bytes=cache_bytes, name=name)


def _gpt2_sizes(raw: Mapping[str, Any]) -> Sizes:
    return Sizes.of(GPT2Config.from_dict(raw))


FAMILIES: tuple[Family, ...] = (
    Family("bert", ("bert",), False, _bert_sizes, _load_bert),
    Family("gpt2", ("gpt2",), True, _gpt2_sizes, decoder_loader("gpt2", GPT2.from_pretrained)),
    # LLAMA (A2, llama.py): add this entry when the family lands (same shape as gpt2's):
    # Family("llama", ("llama", "mistral", "qwen2"), True,
    #        lambda raw: Sizes.of(LlamaConfig.from_dict(raw)),
    #        decoder_loader("llama", Llama.from_pretrained)),
)

SUPPORTED_TYPES = tuple(t for f in FAMILIES for t in f.model_types)


def family_of(raw: Mapping[str, Any]) -> Family:
    """The family of a parsed ``config.json``; a ``SpecError`` saying why if none fits."""
    model_type = raw.get("model_type")
    architectures = raw.get("architectures") or []
    shown = f"model_type {model_type!r}" + (
        f" ({', '.join(map(str, architectures))})" if architectures else ""
    )
    if model_type in ENCODER_DECODER_TYPES or raw.get("is_encoder_decoder"):
        raise SpecError(
            f"{shown} is an encoder-decoder model; only encoders ({_types(False)}) and "
            f"decoders ({_types(True)}) are supported",
            field="model",
        )
    if not isinstance(model_type, str):
        raise SpecError("config.json has no model_type", field="model")
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    raise SpecError(
        f"{shown} is not supported; the supported model types are {', '.join(SUPPORTED_TYPES)}",
        field="model",
    )


def _types(causal: bool) -> str:
    return ", ".join(t for f in FAMILIES if f.causal is causal for t in f.model_types)
