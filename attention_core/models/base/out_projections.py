"""Each attention layer's output projection, cut into its heads' slices (W_O^h).

What a head writes into the residual stream is its context times its slice
of the output projection: value-weighted maps, ablation and the logit lens
read these, for every family (found by transformers' module names, which the
hand-written families share).
"""

from __future__ import annotations

import torch
from torch import nn

from ...errors import SpecError

# Module names (suffixes) of the attention output projection, ours and transformers'.
OUT_PROJECTION_SUFFIXES = (
    ".attn.c_proj",  # GPT-2
    ".self_attn.o_proj",  # Llama, Mistral, Qwen2, Gemma, Phi-3, OLMo 2...
    ".attention.dense",  # GPT-NeoX
    ".attention.output.dense",  # BERT, RoBERTa (transformers)
    ".self_attn.out_proj",  # BART, OPT, Whisper
)


def output_projections(module: nn.Module, num_layers: int) -> list[nn.Module]:
    """Each layer's attention output projection, in layer order, found by name."""
    found = [m for name, m in module.named_modules() if name.endswith(OUT_PROJECTION_SUFFIXES)]
    if len(found) != num_layers:
        raise SpecError(
            f"found {len(found)} attention output projections for {num_layers} layers",
            field="model",
        )
    return found


def head_slices(projection: nn.Module, num_heads: int, head_dim: int) -> torch.Tensor:
    """(H, D, C) from a projection's weight: GPT-2's ``Conv1D`` stores (in, out) and is
    applied as ``x @ W``; ``nn.Linear`` stores (out, in)."""
    weight = projection.weight
    assert isinstance(weight, torch.Tensor)
    W = weight if type(projection).__name__ == "Conv1D" else weight.T  # (H*D, C)
    return W.reshape(num_heads, head_dim, -1)
