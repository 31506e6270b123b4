"""What every decoder family provides, so generation, traces and the registry are written once."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch

from .kv_cache import KVCache
from .maps import ModelMaps
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


class TokenizedLike(Protocol):
    """A tokenized text as any family gives it."""

    @property
    def tokens(self) -> tuple[str, ...]: ...
    @property
    def special(self) -> tuple[bool, ...]: ...


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
