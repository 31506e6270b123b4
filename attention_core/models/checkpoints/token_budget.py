"""How many tokens one model input may have: the model's context, and what the device's
memory allows the long path to keep.

The long path (``long_maps``) keeps every layer's query and key, float32, never a
T × T map: ``layers × (heads + kv_heads) × head_dim × 4`` bytes a token.  Half of
the device's memory left beside the weights goes to them (the rest is the layer
being run, the OS, other requests), so the limit grows with the device and shrinks
with the model: on a 24 GB machine Llama-3.1-8B's shape in bfloat16 (16 GB of
weights, 655 KB of q and k a token) reads ~6,000 tokens, a 1B model its whole
context; on an 80 GB GPU the 8B model reads ~49,000.  ``ATTENTION_VIZ_MODEL_MAX_TOKENS``
overrides it (and the model's context always caps it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .model_size import FALLBACK_MEMORY_BYTES, machine_memory

if TYPE_CHECKING:
    from .model_size import Sizes

# The share of the memory beside the weights that the kept q and k may take.
KEPT_SHARE = 0.5
FLOAT32_BYTES = 4
MIN_TOKENS = 3  # [CLS], a token, [SEP]


def device_memory(device: torch.device) -> int:
    """The memory of ``device``: the GPU's, or the machine's (its cgroup limit if lower)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device.index or 0).total_memory)
    return machine_memory() or FALLBACK_MEMORY_BYTES


def kept_bytes_per_token(shape: Sizes) -> int:
    """What the long path keeps for each token: every layer's q and k, float32."""
    return shape.layers * (shape.heads + shape.kv_heads) * shape.head_dim * FLOAT32_BYTES


def token_limit(shape: Sizes, held_bytes: int, memory: int) -> int:
    """Tokens one input may have: the context, or fewer when the kept q and k of that many
    would pass ``KEPT_SHARE`` of ``memory`` left beside the ``held_bytes`` of weights."""
    free = max(memory - held_bytes, 0) * KEPT_SHARE
    fits = int(free // max(kept_bytes_per_token(shape), 1))
    return max(MIN_TOKENS, min(shape.max_positions, fits))
