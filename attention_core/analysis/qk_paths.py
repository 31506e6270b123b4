"""How one attention layer turns its residual-stream input into queries, keys and values,
linear per component once the norms are frozen (``frozen_norm``).

``LayerPaths.project(parts, positions, constant)`` takes components of the
layer's input at some positions, (N, P, C), and gives each one's query, key
and value, (N, P, H, D) / (N, P, H_kv, D): the pre-attention norm frozen at
the forward's values (none for BERT, post-norm: its layer input is already
normed), the projections without their bias, per-head q/k norms (Qwen3)
frozen, RoPE at each position (linear).  ``constant`` gives the part that is
no component's: the projections' biases and the norms' shifts.  The sum over
components plus the constant is the layer's own q, k, v.

Kinds of layer, by transformers' module names (the hand-written families use
them too): GPT-2 (``ln_1``, fused ``c_attn``), the Llama kind
(``input_layernorm``, ``q_proj``/``k_proj``/``v_proj``, optional
``q_norm``/``k_norm`` per head (Qwen3) or over all heads (OLMo 2, which has
no pre-attention norm), split-half RoPE, grouped-query attention), Phi-3 (the
Llama kind with one fused ``qkv_proj``: q, then k, then v), GPT-NeoX (fused
``query_key_value``, per head q|k|v; RoPE on the first ``rotary_ndims`` of
each head's dimensions) and the hand-written BERT.  Other transformers
families are refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from ..errors import SpecError
from ..models.families.rope import rotate_half
from .frozen_norm import FrozenNorm, frozen

# transformers model types whose residual stream is x + attn(norm(x)) + mlp(norm(x)) with no
# norm on a sublayer's output, and whose attention is one of the kinds above.
# OLMo 2 and Gemma 2/3 normalize each sublayer's output before adding it: a post-attention
# norm, frozen like the others (``residual_parts``); Gemma scales its embedding (in the
# embedding component already) and Gemma 2 soft-caps its scores after the sum.
TRANSFORMERS_TYPES = frozenset(
    {
        "gpt2",
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "phi3",
        "gpt_neox",
        "olmo2",
        "gemma",
        "gemma2",
        "gemma3_text",
    }
)


class Projected(Protocol):
    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class Frozen:
    """A layer's norms frozen at one forward's values: pre-attention, and q/k per head."""

    norm: FrozenNorm | None
    qk: tuple[FrozenNorm | None, FrozenNorm | None]


@dataclass(frozen=True)
class QKV:
    """Per component: q (N, P, H, D), k and v (N, P, H_kv, D)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


def _linear_part(module: Projected, x: torch.Tensor) -> torch.Tensor:
    """``module(x) − module(0)``: an affine projection without its bias."""
    return module(x) - module(torch.zeros_like(x[..., :1, :]))


class LayerPaths:
    """One layer's q/k/v paths (see the module doc); built by ``layer_paths``."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float

    def __init__(
        self,
        norm: nn.Module | None,
        qkv: tuple[Projected, Projected, Projected],
        width: int,
        sizes: tuple[int, int, int],
        scale: float,
        qk_norms: tuple[nn.Module | None, nn.Module | None] = (None, None),
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        self.norm = norm
        self.qkv = qkv
        self.width = width
        self.num_heads, self.num_kv_heads, self.head_dim = sizes
        self.scale = scale
        self.qk_norms = qk_norms
        self.rope = rope  # cos, sin (T, D) for every position of the text
        # The layer's scores after the sum: a sliding window (keys within ``window`` of the
        # query) and Gemma 2's soft-cap, softcap · tanh(score / softcap), before the softmax.
        self.window: int | None = None
        self.softcap: float | None = None

    def allowed(self, length: int, causal: bool) -> torch.Tensor | None:
        """The (T, T) keys each query sees when a window limits them (None: causal or all)."""
        if self.window is None:
            return None
        rows, cols = torch.arange(length)[:, None], torch.arange(length)[None]
        seen = rows - cols < self.window
        return seen & (cols <= rows) if causal else seen & (cols - rows < self.window)

    def freeze(self, x: torch.Tensor) -> Frozen:
        """The norms frozen at the layer's inputs x (P, C): the pre-attention norm (None:
        none) and the per-head q/k norms at the q and k the layer computes from x."""
        norm = None if self.norm is None else frozen(self.norm, x)
        if self.qk_norms == (None, None):
            return Frozen(norm, (None, None))
        normed = x if norm is None else norm.apply(x) + norm.shift
        qk: list[FrozenNorm | None] = []
        for module, proj, heads in zip(
            self.qk_norms, self.qkv[:2], (self.num_heads, self.num_kv_heads), strict=True
        ):
            if module is None:
                qk.append(None)
                continue
            flat = proj(normed)  # (P, heads·D): OLMo 2's norm reads all heads at once
            if _norm_width(module) == self.head_dim:
                flat = flat.reshape(-1, self.head_dim)  # (P·heads, D): per head (Qwen3)
            norm_qk = frozen(module, flat)
            if norm_qk.centered and _norm_width(module) != self.head_dim:
                raise SpecError(
                    "a LayerNorm over all heads' queries or keys centres across heads: the "
                    "decomposition knows per-head norms and RMSNorms",
                    field="model",
                )
            qk.append(_per_head(norm_qk, heads, self.head_dim))
        return Frozen(norm, (qk[0], qk[1]))

    def totals(self, x: torch.Tensor, positions: torch.Tensor) -> QKV:
        """The layer's own q, k, v at ``positions`` from its inputs there, x (P, C): (1, P, ...)."""
        norms = self.freeze(x)
        parts, bias = self.project(x[None], positions, norms), self.bias(positions, norms)
        return QKV(parts.q + bias.q, parts.k + bias.k, parts.v + bias.v)

    def project(self, parts: torch.Tensor, positions: torch.Tensor, norms: Frozen) -> QKV:
        """parts (N, P, C), components of the input at ``positions`` -> their q, k, v."""
        normed = parts if norms.norm is None else norms.norm.apply(parts)
        return self._heads([_linear_part(p, normed) for p in self.qkv], positions, norms)

    def bias(self, positions: torch.Tensor, norms: Frozen) -> QKV:
        """What no component carries: the projections' biases and the norm's shift, (1, P, ...)."""
        C = self.width
        shift = torch.zeros(C) if norms.norm is None else norms.norm.shift
        base = shift.expand(1, len(positions), C)
        return self._heads([p(base) for p in self.qkv], positions, norms)

    def _heads(self, flat: list[torch.Tensor], positions: torch.Tensor, norms: Frozen) -> QKV:
        """(N, P, heads·D) q, k, v -> per head, the q/k norms and RoPE applied."""
        N, P, _ = flat[0].shape
        q, k, v = (
            y.reshape(N, P, heads, self.head_dim)
            for y, heads in zip(
                flat, (self.num_heads, self.num_kv_heads, self.num_kv_heads), strict=True
            )
        )
        q = self._qk_finish(q, positions, norms.qk[0])
        k = self._qk_finish(k, positions, norms.qk[1])
        return QKV(q, k, v)

    def _qk_finish(
        self, y: torch.Tensor, positions: torch.Tensor, norm: FrozenNorm | None
    ) -> torch.Tensor:
        """(N, P, heads, D): the frozen per-head q/k norm, then RoPE at each position."""
        if norm is not None:
            y = norm.apply(y)  # gains (P, heads, D); an RMSNorm over all heads is one too
        if self.rope is not None:
            cos, sin = (t[positions][:, None, :] for t in self.rope)  # (P, 1, R), R ≤ D
            R = cos.shape[-1]  # GPT-NeoX rotates the first R of each head's dimensions
            turned = y[..., :R] * cos + rotate_half(y[..., :R]) * sin
            y = turned if R == y.shape[-1] else torch.cat([turned, y[..., R:]], dim=-1)
        return y


def _norm_width(module: nn.Module) -> int:
    weight = getattr(module, "weight", None)
    return int(weight.shape[-1]) if isinstance(weight, torch.Tensor) else -1


def _per_head(norm: FrozenNorm, heads: int, head_dim: int) -> FrozenNorm:
    """A norm frozen at (P·heads, D) rows, or (P, heads·D) (over all heads), as gains
    (P, heads, D)."""
    gain = norm.gain.reshape(-1, heads, head_dim)
    return FrozenNorm(gain, norm.shift, norm.centered)


def _conv_slices(c_attn: nn.Module, width: int) -> tuple[Projected, Projected, Projected]:
    """GPT-2's fused ``c_attn`` (``x @ W + b``, W (C, 3C)) as three projections."""
    W, b = c_attn.weight, c_attn.bias
    assert isinstance(W, torch.Tensor) and isinstance(b, torch.Tensor)

    def part(k: int) -> Projected:
        return lambda x: x @ W[:, k * width : (k + 1) * width] + b[k * width : (k + 1) * width]

    return part(0), part(1), part(2)


def _gpt2_scale(attn: nn.Module, layer: int, head_dim: int) -> float:
    own = getattr(attn, "scale", None)
    if isinstance(own, float):
        return own
    scale = head_dim**-0.5 if getattr(attn, "scale_attn_weights", True) else 1.0
    if getattr(attn, "scale_attn_by_inverse_layer_idx", False):
        scale /= layer + 1
    return scale


def gpt2_paths(block: nn.Module, layer: int, num_heads: int) -> LayerPaths:
    attn: Any = block.get_submodule("attn")
    width = attn.c_attn.weight.shape[0]
    D = width // num_heads
    return LayerPaths(
        block.get_submodule("ln_1"),
        _conv_slices(attn.c_attn, width),
        width,
        (num_heads, num_heads, D),
        _gpt2_scale(attn, layer, D),
    )


def _scale(attn: nn.Module, head_dim: int) -> float:
    scale = getattr(attn, "scale", None) or getattr(attn, "scaling", None)
    return scale if isinstance(scale, float) else head_dim**-0.5


def _rows(linear: nn.Module, rows: torch.Tensor) -> Projected:
    """A fused projection's output ``rows`` as a projection of its own."""
    W, b = linear.weight, getattr(linear, "bias", None)
    assert isinstance(W, torch.Tensor)
    picked_b = b[rows] if isinstance(b, torch.Tensor) else None
    picked_W = W[rows]
    return lambda x: torch.nn.functional.linear(x, picked_W, picked_b)


def llama_paths(
    block: nn.Module, sizes: tuple[int, int, int], rope: tuple[torch.Tensor, torch.Tensor]
) -> LayerPaths:
    """The Llama kind; OLMo 2 (no ``input_layernorm``: its attention reads the residual
    stream itself) and Phi-3 (``qkv_proj``: q, k, v one after the other) too."""
    attn: Any = block.get_submodule("self_attn")
    H, H_kv, D = sizes
    fused = getattr(attn, "qkv_proj", None)
    if fused is not None:
        q_end, k_end = H * D, (H + H_kv) * D
        qkv: tuple[Projected, Projected, Projected] = (
            _rows(fused, torch.arange(q_end)),
            _rows(fused, torch.arange(q_end, k_end)),
            _rows(fused, torch.arange(k_end, k_end + H_kv * D)),
        )
        width = fused.in_features
    else:
        qkv, width = (attn.q_proj, attn.k_proj, attn.v_proj), attn.q_proj.in_features
    return LayerPaths(
        getattr(block, "input_layernorm", None),
        qkv,
        width,
        sizes,
        _scale(attn, D),
        (getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)),
        rope,
    )


def neox_paths(
    block: nn.Module, num_heads: int, rope: tuple[torch.Tensor, torch.Tensor]
) -> LayerPaths:
    """GPT-NeoX: ``query_key_value``'s output is (heads, q|k|v, D); ``input_layernorm``
    before attention (with the parallel residual, the MLP reads its own norm of x)."""
    attn: Any = block.get_submodule("attention")
    fused = attn.query_key_value
    D = fused.out_features // (3 * num_heads)

    def part(k: int) -> Projected:
        rows = torch.cat(
            [torch.arange(h * 3 * D + k * D, h * 3 * D + (k + 1) * D) for h in range(num_heads)]
        )
        return _rows(fused, rows)

    return LayerPaths(
        block.get_submodule("input_layernorm"),
        (part(0), part(1), part(2)),
        fused.in_features,
        (num_heads, num_heads, D),
        _scale(attn, D),
        rope=rope,
    )


def refuse(family: str, why: str) -> SpecError:
    return SpecError(f"the {family} family: {why}", field="model")
