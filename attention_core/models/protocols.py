"""What every decoder family provides, so generation, traces and the registry are written once."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch

from .kv_cache import KVCache
from .outputs import DecoderOutput


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
