"""The Llama family, written once in plain PyTorch; every attention is ``attention_with_steps``.

One class serves transformers' ``model_type`` ``llama`` (Llama 1-3, SmolLM,
TinyLlama), ``mistral`` (without a sliding window) and ``qwen2`` (biases on
q, k and v).  Module tree and parameter names are those of
``LlamaForCausalLM`` / ``MistralForCausalLM`` / ``Qwen2ForCausalLM``, so a
checkpoint loads by name.  One block (gpt-fast's shape)::

    x = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))  # n = rms_norm(x)
    x = x + down_proj(silu(gate_proj(m)) * up_proj(m))                      # m = rms_norm(x)

RoPE is transformers' split-half layout with ``rope_theta`` and the
``rope_scaling`` kinds of ``rope.py``.  Grouped-query attention
(``num_key_value_heads`` < ``num_attention_heads``) goes to the attention
function with ``enable_gqa=True``: query head h reads kv head
``h // (H / H_kv)``, the keys are never copied, and every step comes back per
query head, as transformers returns its maps.

Dynamic (NTK) scaling and a cache: past ``max_position_embeddings`` the
frequencies depend on the sequence's length, so in a full forward pass every
position (every key, and through them every hidden state) changes with each
new token.  transformers' own cached decoding rotates only the new keys with
the new length's frequencies and keeps the rest (and its rotary module
remembers the longest length it has seen), so there a cached pass past the
limit differs from a full one.  Here ``new_cache`` gives dynamic models a
``TokenKVCache`` that also keeps the token ids, and a cached pass that ends
past the limit recomputes the whole sequence: cached decoding equals a full
forward pass, at the cost of one full pass per step beyond the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple

import torch
from torch import nn

from ...attention import AttentionSteps
from ...errors import SpecError
from ..base.decoder_lm import ACTIVATIONS, DecoderLM, DecoderSelfAttention
from ..base.kv_cache import KVCache
from ..base.outputs import DecoderOutput, LayerTrace
from ..base.protocols import TransformersNames, Wanted
from ..checkpoints.files import check_supported
from ..maps.blocked_pass import BlockedPass
from .rope import RopeConfig, apply_rope, inverse_frequencies, rope_angles

MODEL_TYPES = ("llama", "mistral", "qwen2")
ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
}
# Values transformers 5 gives keys a config.json omits, where a family's differ from Llama's.
_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"bos_token_id": 1, "eos_token_id": 2},
    "mistral": {
        "intermediate_size": 14336,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "bos_token_id": 1,
        "eos_token_id": 2,
    },
    "qwen2": {
        "vocab_size": 151936,
        "intermediate_size": 22016,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
    },
}


@dataclass(frozen=True)
class LlamaConfig(TransformersNames):
    """The fields of a Llama-family ``config.json`` the forward pass uses.

    ``num_key_value_heads`` 0 means one per query head; ``head_dim`` 0 means
    ``hidden_size // num_attention_heads`` (both resolved on construction).
    """

    model_type: str = "llama"
    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 0
    head_dim: int = 0
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    rope: RopeConfig = RopeConfig()
    attention_bias: bool = False
    mlp_bias: bool = False
    attention_dropout: float = 0.0
    tie_word_embeddings: bool = False
    sliding_window: int | None = None
    initializer_range: float = 0.02
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise SpecError(
                f"model_type {self.model_type!r} is not one of {', '.join(MODEL_TYPES)}",
                field="model",
            )
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("max_position_embeddings", self.max_position_embeddings, minimum=1)
        _check_int("num_hidden_layers", self.num_hidden_layers, minimum=0)
        _check_int("num_key_value_heads", self.num_key_value_heads, minimum=0)
        _check_int("head_dim", self.head_dim, minimum=0)
        if self.num_key_value_heads == 0:
            object.__setattr__(self, "num_key_value_heads", self.num_attention_heads)
        if self.head_dim == 0:
            if self.hidden_size % self.num_attention_heads:
                raise SpecError(
                    f"hidden_size ({self.hidden_size}) is not a multiple of "
                    f"num_attention_heads ({self.num_attention_heads})",
                    field="model",
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        if self.num_attention_heads % self.num_key_value_heads:
            raise SpecError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})",
                field="model",
            )
        if self.head_dim % 2:
            raise SpecError(
                f"head_dim is {self.head_dim}; RoPE rotates pairs of dimensions, "
                "so it must be even",
                field="model",
            )
        check_supported("hidden_act", self.hidden_act, ACTIVATIONS, "model")
        if not self.rms_norm_eps >= 0:
            raise SpecError(f"rms_norm_eps is {self.rms_norm_eps}; it must be >= 0", field="model")
        if self.sliding_window is not None and self.sliding_window < self.max_positions:
            raise SpecError(
                f"sliding_window is {self.sliding_window}, shorter than the context "
                f"({self.max_positions} positions): sliding-window attention is not supported",
                field="model",
            )

    # Where Llama's common names differ from ``TransformersNames`` (grouped-query heads, RoPE).
    @property
    def num_kv_heads(self) -> int:
        return self.num_key_value_heads

    @property
    def max_positions(self) -> int:
        """The context: ``max_position_embeddings``, or longer as the RoPE scaling allows."""
        return self.rope.context_length(self.max_position_embeddings)

    @property
    def qkv_bias(self) -> bool:
        return self.model_type == "qwen2" or (self.model_type == "llama" and self.attention_bias)

    @property
    def o_proj_bias(self) -> bool:
        return self.model_type == "llama" and self.attention_bias

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> LlamaConfig:
        """From a transformers ``config.json``; refuses what this module does not implement."""
        model_type = raw.get("model_type")
        if model_type not in MODEL_TYPES:
            raise SpecError(
                f"model_type {model_type!r} is not a Llama-family type ({', '.join(MODEL_TYPES)})",
                field="model",
            )
        values: dict[str, Any] = dict(_FAMILY_DEFAULTS[model_type])
        known = {f.name for f in fields(cls)} - {"rope"}
        values.update({k: v for k, v in raw.items() if k in known})
        for name in ("num_key_value_heads", "head_dim"):
            if values.get(name) is None:
                values[name] = 0
        if isinstance(values.get("eos_token_id"), list):
            values["eos_token_id"] = tuple(values["eos_token_id"])
        if model_type == "mistral":
            values["attention_bias"] = values["mlp_bias"] = False  # MistralForCausalLM has none
        if model_type == "qwen2":
            if raw.get("use_sliding_window"):
                raise SpecError(
                    "use_sliding_window is true: sliding-window attention is not supported",
                    field="model",
                )
            values["sliding_window"] = None  # only read when use_sliding_window is true
            values["attention_bias"] = values["mlp_bias"] = False  # biases fixed by the class
        layer_types = raw.get("layer_types") or []
        if model_type != "mistral" and any(t != "full_attention" for t in layer_types):
            raise SpecError(
                f"layer_types {sorted(set(layer_types))} include layers other than "
                "full_attention; only full attention is supported",
                field="model",
            )
        max_positions = values.get("max_position_embeddings", 2048)
        if isinstance(max_positions, bool) or not isinstance(max_positions, int):
            raise SpecError(
                f"max_position_embeddings is {max_positions!r}; it must be an integer",
                field="model",
            )
        try:
            return cls(rope=RopeConfig.from_dict(raw, max_positions), **values)
        except TypeError as exc:
            raise SpecError(f"config.json has a malformed field ({exc})", field="model") from exc

    def to_dict(self) -> dict[str, Any]:
        """A ``config.json`` that transformers reads as this family's ``*ForCausalLM``."""
        out: dict[str, Any] = {
            "model_type": self.model_type,
            "architectures": [ARCHITECTURES[self.model_type]],
            "dtype": "float32",
        }
        for f in fields(self):
            if f.name not in ("model_type", "rope"):
                out[f.name] = getattr(self, f.name)
        if isinstance(self.eos_token_id, tuple):
            out["eos_token_id"] = list(self.eos_token_id)
        out.update(self.rope.to_dict())
        if self.model_type == "qwen2":
            out["use_sliding_window"] = False
        return out


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{name} is {value!r}; it must be an integer", field="model")
    if value < minimum:
        raise SpecError(f"{name} is {value}; it must be at least {minimum}", field="model")


class TokenKVCache(KVCache):
    """A ``KVCache`` that also keeps the token ids it has seen, (B, max_length).

    For dynamic RoPE scaling, which recomputes the sequence from its tokens
    once it runs past ``max_position_embeddings`` (see the module doc).
    """

    def __init__(
        self, num_layers: int, batch: int, num_kv_heads: int, max_length: int, head_dim: int
    ) -> None:
        super().__init__(num_layers, batch, num_kv_heads, max_length, head_dim)
        self.token_ids = torch.zeros(batch, max_length, dtype=torch.long)

    def keep_tokens(self, input_ids: torch.Tensor) -> None:
        """Store (B, T) ids after the cached positions."""
        end = self.length + input_ids.shape[1]
        if end > self.max_length:
            raise SpecError(
                f"the sequence would reach {end} positions; the cache holds {self.max_length}",
                field="max_new_tokens",
            )
        self.token_ids[:, self.length : end] = input_ids


class RMSNorm(nn.Module):
    """``weight * x / sqrt(mean(x^2) + eps)`` over the last dimension, in transformers' order."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)  # (B, T, 1)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class Projections(NamedTuple):
    """What one attention layer fed to the attention function, for a ``LayerTrace``."""

    q: torch.Tensor  # (B, H, T, D) after RoPE
    k: torch.Tensor  # (B, H_kv, S, D) after RoPE, cached positions included
    v: torch.Tensor  # (B, H_kv, S, D)
    q_unrotated: torch.Tensor  # (B, H, T, D)
    k_unrotated: torch.Tensor  # (B, H_kv, T, D): the new positions only


class LlamaAttention(DecoderSelfAttention):
    def __init__(self, config: LlamaConfig, layer_idx: int) -> None:
        H, H_kv, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        super().__init__(layer_idx, H, H_kv, D, D**-0.5, config.attention_dropout)
        self.q_proj = nn.Linear(config.hidden_size, H * D, bias=config.qkv_bias)
        self.k_proj = nn.Linear(config.hidden_size, H_kv * D, bias=config.qkv_bias)
        self.v_proj = nn.Linear(config.hidden_size, H_kv * D, bias=config.qkv_bias)
        self.o_proj = nn.Linear(H * D, config.hidden_size, bias=config.o_proj_bias)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: KVCache | None,
        blocked: BlockedPass | None = None,
    ) -> tuple[torch.Tensor, AttentionSteps, Projections]:
        B, T, _ = x.shape
        H, H_kv, D = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        v = self.v_proj(x).view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
        q_rot, k_rot = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        keys, values = k_rot, v
        if cache is not None:
            keys, values = cache.update(self.layer_idx, k_rot, v)  # (B, H_kv, S, D)
        steps = self.attend(q_rot, keys, values, blocked)
        y = steps.context_vec.transpose(1, 2).reshape(
            B, T, H * D
        )  # (B, T, H*D): heads side by side
        return self.o_proj(y.to(x.dtype)), steps, Projections(q_rot, keys, values, q, k)


class LlamaMLP(nn.Module):
    """SwiGLU: ``down_proj(act(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        hidden, inner, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)
        self.act = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return out


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config, layer_idx)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: KVCache | None,
        want_trace: bool,
        blocked: BlockedPass | None = None,
        attention_only: bool = False,
    ) -> tuple[torch.Tensor, AttentionSteps, LayerTrace | None]:
        """``attention_only``: the MLP skipped, ``x`` returned with the attention added
        (a maps-only pass's last layer, ``stack.run_blocks``)."""
        normed = self.input_layernorm(x)
        attended, steps, used = self.self_attn(normed, cos, sin, cache, blocked)
        x = x + attended
        if not attention_only:
            x = x + self.mlp(self.post_attention_layernorm(x))
        trace = None
        if want_trace:
            trace = LayerTrace(
                layer=self.self_attn.layer_idx,
                x=normed,
                q=used.q,
                k=used.k,
                v=used.v,
                steps=steps,
                q_unrotated=used.q_unrotated,
                k_unrotated=used.k_unrotated,
            )
        return x, steps, trace


class LlamaModel(nn.Module):
    """The transformer body: embeddings, layers, final norm (``model.*`` keys)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class Llama(DecoderLM[LlamaConfig]):
    """A Llama-family decoder with its language-modelling head (``*ForCausalLM`` names)."""

    config_class = LlamaConfig
    embedding_name = "model.embed_tokens"
    blocks_name = "model.layers"
    final_norm_name = "model.norm"
    # Older checkpoints also store RoPE's inverse frequencies; they are recomputed here.
    ignored_suffixes = (".rotary_emb.inv_freq",)

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.model = LlamaModel(config)
        self.add_head()

    def init_weights(self) -> None:
        """transformers' initialization, from torch's RNG: Normal(0, initializer_range) for
        embeddings and linear weights, zero biases, unit RMSNorm gains."""
        std = self.config.initializer_range
        for name, param in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(param)
            elif name.endswith(".bias"):
                nn.init.zeros_(param)
            else:
                nn.init.normal_(param, 0.0, std)

    def new_cache(self, batch: int = 1, max_length: int | None = None) -> KVCache:
        c = self.config
        if c.rope.rope_type != "dynamic":
            return super().new_cache(batch, max_length)
        size = (c.num_hidden_layers, batch, c.num_key_value_heads, max_length or c.max_positions)
        return TokenKVCache(*size, c.head_dim)

    def rotary_angles(self, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (T, D) for positions ``start .. end - 1`` of a sequence ``end`` long."""
        c = self.config
        inv_freq, scaling = inverse_frequencies(c.rope, c.head_dim, c.max_position_embeddings, end)
        return rope_angles(inv_freq, start, end, scaling)

    def embed(
        self, input_ids: torch.Tensor, start: int, cache: KVCache | None
    ) -> tuple[torch.Tensor, tuple[object, ...]]:
        cos, sin = self.rotary_angles(start, start + input_ids.shape[1])  # each (T, D)
        return self.model.embed_tokens(input_ids), (cos, sin, cache)  # x (B, T, C)

    def decode(
        self, input_ids: torch.Tensor, start: int, cache: KVCache | None, wanted: Wanted
    ) -> DecoderOutput:
        """Dynamic RoPE with a cache: keep the tokens, recompute past the limit (module doc)."""
        if cache is not None and self.config.rope.rope_type == "dynamic":
            if not isinstance(cache, TokenKVCache):
                raise SpecError(
                    "dynamic RoPE scaling needs the cache made by new_cache()", field="model"
                )
            cache.keep_tokens(input_ids)
            T = input_ids.shape[1]
            if start > 0 and start + T > self.config.max_position_embeddings:
                return self._recompute(cache, T, wanted)
        return super().decode(input_ids, start, cache, wanted)

    def _recompute(self, cache: TokenKVCache, num_new: int, wanted: Wanted) -> DecoderOutput:
        """The whole cached sequence again from its tokens; the last ``num_new`` rows returned."""
        ids = cache.token_ids[:, : cache.length + num_new].clone()  # (B, S)
        cache.length = 0
        whole = self.forward(
            ids,
            cache=cache,
            num_logits=num_new if wanted.num_logits is None else wanted.num_logits,
            output_attentions=wanted.output_attentions,
            output_hidden_states=wanted.output_hidden_states,
            trace_layer=wanted.trace_layer,
            blocked=wanted.blocked,
            maps_only=wanted.maps_only,
        )
        return DecoderOutput(
            logits=whole.logits,
            attentions=tuple(a[:, :, -num_new:] for a in whole.attentions),  # (B, H, T, S)
            hidden_states=tuple(h[:, -num_new:] for h in whole.hidden_states),  # (B, T, C)
            trace=None if whole.trace is None else _last_rows(whole.trace, num_new),
        )


def _last_rows(trace: LayerTrace, num_new: int) -> LayerTrace:
    """A trace of S query positions cut to its last ``num_new`` (keys and values kept whole)."""
    steps = trace.steps
    allowed = steps.allowed
    if allowed is not None and allowed.dim() >= 2:
        allowed = allowed[..., -num_new:, :]
    rows = replace(
        steps,
        attn_scores=steps.attn_scores[..., -num_new:, :],
        scaled_scores=steps.scaled_scores[..., -num_new:, :],
        masked_scores=steps.masked_scores[..., -num_new:, :],
        attn_weights=steps.attn_weights[..., -num_new:, :],
        context_vec=steps.context_vec[..., -num_new:, :],
        allowed=allowed,
    )
    return replace(
        trace,
        x=trace.x[:, -num_new:],
        q=trace.q[:, :, -num_new:],
        steps=rows,
        q_unrotated=None if trace.q_unrotated is None else trace.q_unrotated[:, :, -num_new:],
        k_unrotated=None if trace.k_unrotated is None else trace.k_unrotated[:, :, -num_new:],
    )
