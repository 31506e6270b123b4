"""Keys and values of the positions a decoder has already seen (gpt-fast's ``KVCache``)."""

from __future__ import annotations

import torch

from ...errors import SpecError


class KVCache:
    """Per-layer key/value buffers, preallocated for ``max_length`` positions.

    Shapes: keys and values (layers, B, H_kv, max_length, D).  ``length`` is
    how many positions are filled; a model's forward writes its new positions
    at ``length`` in every layer, then advances it.
    """

    def __init__(
        self,
        num_layers: int,
        batch: int,
        num_kv_heads: int,
        max_length: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shape = (num_layers, batch, num_kv_heads, max_length, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype)
        self.values = torch.zeros(shape, dtype=dtype)
        self.max_length = max_length
        self.length = 0

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this step's k, v (B, H_kv, T, D) after the cached positions of ``layer``.

        Returns every position's keys and values so far, (B, H_kv, length + T, D).
        """
        end = self.length + k.shape[-2]
        if end > self.max_length:
            raise SpecError(
                f"the sequence would reach {end} positions; the cache holds {self.max_length}",
                field="max_new_tokens",
            )
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, steps: int) -> None:
        self.length += steps
