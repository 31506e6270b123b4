"""GPT-2, written once in plain PyTorch; every attention is ``attention_with_steps``.

The module tree and parameter names are those of transformers'
``GPT2LMHeadModel``, so a checkpoint loads by name and a model trained here
saves as a checkpoint transformers can load.  GPT-2 stores its linear layers
(``c_attn``, ``c_proj``, ``c_fc``) as ``Conv1D``: weight (in, out), applied as
``x @ W + b``, the transpose of ``nn.Linear``.  One block (nanoGPT's shape)::

    x = x + c_proj(attention(ln_1(x)))        # causal, scaled by 1/sqrt(head_dim)
    x = x + mlp(ln_2(x))                      # c_fc -> gelu -> c_proj

Training runs through the same class (dropout is live in ``train()`` mode);
inference takes a ``KVCache`` for generation and can return every layer's
weights, hidden states, and one layer's full trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import nn

from ...attention import AttentionSteps
from ...errors import SpecError
from ..base.decoder_lm import ACTIVATIONS, DecoderLM, DecoderSelfAttention
from ..base.kv_cache import KVCache
from ..base.outputs import LayerTrace
from ..base.protocols import Alias
from ..checkpoints.files import check_supported
from ..maps.blocked_pass import BlockedPass


@dataclass(frozen=True)
class GPT2Config:
    """The fields of a GPT-2 ``config.json`` the forward pass uses, with its defaults."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    initializer_range: float = 0.02
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    tie_word_embeddings: bool = True
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_positions", "n_embd", "n_head"):
            if getattr(self, name) < 1:
                raise SpecError(f"{name} is {getattr(self, name)}; it must be at least 1")
        if self.n_layer < 0:
            raise SpecError(f"n_layer is {self.n_layer}; it must not be negative")
        if self.n_embd % self.n_head:
            raise SpecError(
                f"n_embd ({self.n_embd}) is not a multiple of n_head ({self.n_head})",
                field="n_head",
            )
        check_supported(
            "activation_function", self.activation_function, ACTIVATIONS, "activation_function"
        )

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def inner_size(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    # The common names of ``protocols.DecoderConfig``.
    num_layers = Alias("n_layer")
    num_heads = Alias("n_head")
    num_kv_heads = Alias("n_head")
    hidden_size = Alias("n_embd")
    max_positions = Alias("n_positions")
    vocabulary_size = Alias("vocab_size")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> GPT2Config:
        """From a transformers ``config.json``; refuses what this module does not implement."""
        if raw.get("model_type", "gpt2") != "gpt2":
            raise SpecError(f"model_type {raw.get('model_type')!r} is not 'gpt2'", field="model")
        if raw.get("add_cross_attention"):
            raise SpecError("GPT-2 with cross-attention layers is not supported", field="model")
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in raw.items() if k in known})
        except TypeError as exc:
            raise SpecError(f"config.json has a malformed field ({exc})", field="model") from exc

    def to_dict(self) -> dict[str, Any]:
        """A ``config.json`` that transformers reads as ``GPT2LMHeadModel``."""
        return {
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "dtype": "float32",
            **asdict(self),
        }


class Conv1D(nn.Module):
    """GPT-2's linear layer: ``x @ weight + bias``, weight (in, out)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)  # (B*T, out)
        return flat.view(*x.shape[:-1], flat.shape[-1])  # (B, T, out)


class GPT2Attention(DecoderSelfAttention):
    def __init__(self, config: GPT2Config, layer_idx: int) -> None:
        scale = config.head_dim**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            scale /= layer_idx + 1
        H = config.n_head
        super().__init__(layer_idx, H, H, config.head_dim, scale, config.attn_pdrop)
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def forward(
        self, x: torch.Tensor, cache: KVCache | None, blocked: BlockedPass | None = None
    ) -> tuple[torch.Tensor, AttentionSteps, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # each (B, T, C)
        H, D = self.num_heads, self.head_dim
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        v = v.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)  # (B, H, S, D)
        steps = self.attend(q, k, v, blocked)
        y = steps.context_vec.transpose(1, 2).reshape(B, T, C)  # (B, T, C): heads side by side
        return self.resid_dropout(self.c_proj(y.to(x.dtype))), steps, (q, k, v)


class GPT2MLP(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, config.inner_size)
        self.c_proj = Conv1D(config.inner_size, config.n_embd)
        self.act = ACTIVATIONS[config.activation_function]
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.dropout(self.c_proj(self.act(self.c_fc(x))))
        return out


class GPT2Block(nn.Module):
    def __init__(self, config: GPT2Config, layer_idx: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config, layer_idx)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(config)

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None,
        want_trace: bool,
        blocked: BlockedPass | None = None,
        attention_only: bool = False,
    ) -> tuple[torch.Tensor, AttentionSteps, LayerTrace | None]:
        """``attention_only``: the MLP skipped (a maps-only pass's last block)."""
        normed = self.ln_1(x)
        attended, steps, (q, k, v) = self.attn(normed, cache, blocked)
        x = x + attended
        if not attention_only:
            x = x + self.mlp(self.ln_2(x))
        trace = None
        if want_trace:
            trace = LayerTrace(layer=self.attn.layer_idx, x=normed, q=q, k=k, v=v, steps=steps)
        return x, steps, trace


class GPT2Model(nn.Module):
    """The transformer body: embeddings, blocks, final norm (``transformer.*`` keys)."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList(GPT2Block(config, i) for i in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)


class GPT2(DecoderLM[GPT2Config]):
    """GPT-2 with a language-modelling head; parameter names as in ``GPT2LMHeadModel``."""

    config_class = GPT2Config
    embedding_name = "transformer.wte"
    blocks_name = "transformer.h"
    final_norm_name = "transformer.ln_f"
    # OpenAI's checkpoints also store the causal mask as buffers; they carry no weights.
    ignored_suffixes = (".attn.bias", ".attn.masked_bias")

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.transformer = GPT2Model(config)
        self.add_head()

    @staticmethod
    def checkpoint_name(key: str) -> str:
        """Transformers' and OpenAI's key layouts (with or without ``transformer.``)."""
        return key if key.startswith(("transformer.", "lm_head.")) else f"transformer.{key}"

    def init_weights(self) -> None:
        """GPT-2's initialization (as transformers and nanoGPT do it), from torch's RNG.

        Normal(0, 0.02) for embeddings and linear weights, the residual
        projections (``c_proj``) scaled by 1/sqrt(2 * n_layer), zero biases,
        unit LayerNorm gains.
        """
        std = self.config.initializer_range
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, 0.0, std / math.sqrt(2 * max(self.config.n_layer, 1)))
            elif name.endswith(".bias"):
                nn.init.zeros_(param)
            elif ".ln_" in name or "ln_f" in name:
                nn.init.ones_(param)
            else:
                nn.init.normal_(param, 0.0, std)

    def embed(
        self, input_ids: torch.Tensor, start: int, cache: KVCache | None
    ) -> tuple[torch.Tensor, tuple[object, ...]]:
        positions = torch.arange(start, start + input_ids.shape[1])  # (T,)
        body = self.transformer
        x = body.drop(body.wte(input_ids) + body.wpe(positions))  # (B, T, C)
        return x, (cache,)
