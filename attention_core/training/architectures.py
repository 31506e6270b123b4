"""The tutorials' ladder as configurations of the one GPT-2 class.

Every rung is a ``GPT2`` whose unused parts are **fixed at zero**: set to zero
and never trained (a whole tensor gets ``requires_grad=False`` and stays out
of the optimizer; a slice of one, the query and key columns of ``c_attn``,
has its gradient masked to zero, and AdamW leaves a zero with zero gradient
at zero, weight decay included).  So each trained model is still an ordinary
GPT-2 checkpoint that transformers loads, and still computes what its rung says:

- ``bigram``: no layers, the position table at zero and an untied head, so the
  logits are a function of the current character alone (a next-character table).
- ``average``: one block whose query and key weights are zero, so every score
  is 0 and the causal softmax is the uniform average of the past (the
  tutorials' ``tril`` matrix), and whose MLP is zero.
- ``single_head`` / ``multi_head``: one block of 1 / ``n_head`` learned heads, MLP zero.
- ``gpt``: ``n_layer`` full blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..models.families.gpt2 import GPT2, GPT2Config
from .config import TrainConfig


@dataclass(frozen=True)
class BuiltModel:
    """The model and the names of what is fixed at zero (whole tensors, and tensors in part)."""

    model: GPT2
    frozen: tuple[str, ...]
    masked: tuple[str, ...]


def gpt2_config(config: TrainConfig, vocab_size: int) -> GPT2Config:
    """The GPT-2 ``config.json`` of a rung: the sizes it builds, nanoGPT's dropout everywhere."""
    return GPT2Config(
        vocab_size=vocab_size,
        n_positions=config.block_size,
        n_embd=config.n_embd,
        n_layer=config.effective_layers,
        n_head=config.effective_heads,
        # Exact GELU, as nanoGPT trains: on CPU torch's tanh approximation (GPT-2's
        # "gelu_new") costs ~5× as much, and transformers reads "gelu" as this one.
        activation_function="gelu",
        resid_pdrop=config.dropout,
        embd_pdrop=config.dropout,
        attn_pdrop=config.dropout,
        tie_word_embeddings=config.architecture != "bigram",
    )


def build_model(config: TrainConfig, vocab_size: int) -> BuiltModel:
    """A freshly initialized model for ``config`` (GPT-2's init, from torch's global RNG)."""
    model = GPT2(gpt2_config(config, vocab_size))
    model.init_weights()
    frozen: list[str] = []
    masked: list[str] = []
    if config.architecture == "bigram":
        frozen.append("transformer.wpe.weight")
    if config.architecture in ("average", "single_head", "multi_head"):
        block = "transformer.h.0"
        frozen += [f"{block}.ln_2.weight", f"{block}.ln_2.bias"]
        frozen += [f"{block}.mlp.{p}.{k}" for p in ("c_fc", "c_proj") for k in ("weight", "bias")]
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in frozen:
            if name.endswith("ln_2.weight"):
                params[name].fill_(1.0)  # a LayerNorm in its initial state; its output meets zeros
            else:
                params[name].zero_()
            params[name].requires_grad_(False)
        if config.architecture == "average":
            for name in ("transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias"):
                _fix_query_key_at_zero(params[name], config.n_embd)
                masked.append(name)
    return BuiltModel(model, tuple(frozen), tuple(masked))


def _fix_query_key_at_zero(param: torch.nn.Parameter, n_embd: int) -> None:
    """Zero the query and key columns of ``c_attn`` (weight (C, 3C) or bias (3C,)) for good."""
    keep = torch.ones(param.shape[-1])
    keep[: 2 * n_embd] = 0.0  # c_attn's output is [query | key | value], each n_embd wide
    param.mul_(keep)
    param.register_hook(lambda grad: grad * keep)  # type: ignore[no-untyped-call]


def parameter_count(config: TrainConfig, vocab_size: int) -> int:
    """Parameters of the checkpoint (the tied head counted once), without building it."""
    C, L, V, T = config.n_embd, config.effective_layers, vocab_size, config.block_size
    block = 2 * 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C)
    head = 0 if config.architecture != "bigram" else V * C
    return V * C + T * C + L * block + 2 * C + head


def trainable_parameters(built: BuiltModel) -> list[torch.nn.Parameter]:
    return [p for p in built.model.parameters() if p.requires_grad]
