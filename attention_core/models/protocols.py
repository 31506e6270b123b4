"""What every decoder family provides, so generation, traces and the registry are written once."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch

from .kv_cache import KVCache
from .maps import ModelMaps, TokenizedLike
from .outputs import DecoderOutput, LayerTrace


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


def model_info(
    name: str, family: str, causal: bool, config: DecoderConfig, max_tokens: int
) -> dict[str, object]:
    """``TextModel.info()`` for any family: what ``GET /api/model`` says about a model."""
    return {
        "name": name,
        "family": family,
        "causal": causal,
        "layers": config.num_layers,
        "heads": config.num_heads,
        "kv_heads": config.num_kv_heads,
        "hidden": config.hidden_size,
        "head_dim": config.head_dim,
        "vocab_size": config.vocabulary_size,
        "max_positions": config.max_positions,
        "max_tokens": max_tokens,
    }


class TransformersNames:
    """``DecoderConfig``'s common names, for a config dataclass whose fields carry
    transformers' own names (``num_hidden_layers``, ``num_attention_heads``, ``vocab_size``)."""

    num_hidden_layers: int
    num_attention_heads: int
    vocab_size: int

    @property
    def num_layers(self) -> int:
        return self.num_hidden_layers

    @property
    def num_heads(self) -> int:
        return self.num_attention_heads

    @property
    def vocabulary_size(self) -> int:
        return self.vocab_size


class CausalLM(Protocol):
    """A decoder-only language model (GPT-2, Llama family) as this package writes them.

    ``forward(input_ids (B, T), cache=…, num_logits=…, output_attentions=…,
    output_hidden_states=…, trace_layer=…) -> DecoderOutput``; with a cache the
    new positions follow the cached ones and the cache advances by T.
    """

    @property
    def config(self) -> DecoderConfig: ...

    def __call__(
        self,
        input_ids: torch.Tensor,
        *,
        cache: KVCache | None = None,
        num_logits: int | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        trace_layer: int | None = None,
    ) -> DecoderOutput: ...

    def new_cache(self, batch: int = 1, max_length: int | None = None) -> KVCache: ...

    def save_pretrained(self, directory: Path) -> None: ...


class TextModel(Protocol):
    """A loaded checkpoint of any family, as the app uses it (``bert.Encoder``, ``Decoder``).

    ``encode`` gives every layer's maps for a text (``text_b``: an encoder's
    sentence pair); ``trace`` one layer's every tensor (0-based layer).
    """

    @property
    def name(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def causal(self) -> bool: ...
    @property
    def max_tokens(self) -> int: ...

    def info(self) -> dict[str, object]: ...

    def to_device(self, device: torch.device) -> None: ...

    def encode(self, text: str, text_b: str | None = None) -> ModelMaps: ...

    def trace(
        self, text: str, layer: int, text_b: str | None = None
    ) -> tuple[TokenizedLike, LayerTrace]: ...
