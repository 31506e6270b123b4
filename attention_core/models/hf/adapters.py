"""Families that compute attention in their own code, run through the core all the same.

Bloom, MPT, Falcon, DeBERTa (v1 and v2), GPT-Neo, GIT and FSMT never call transformers' attention
interface: each attention module multiplies its own q and k and adds its own
terms.  An adapter here replaces that module's ``forward`` (on the instance,
nothing global) with the family's own projections and terms handed to
``capture.core_attention``, so each call is ``attention_with_steps`` and is
captured like any other family's:

- Bloom, MPT and Falcon with ALiBi: the ALiBi term is the score bias;
- Falcon: its fused query/key/value split by its own ``_split_heads``, RoPE its own;
- DeBERTa-v2: the content-to-position and position-to-content terms (computed by the
  module's own ``disentangled_attention_bias``) are the score bias, a step of its own;
- DeBERTa (v1): its fused projection with q and v biases, the same terms as the bias;
- GPT-Neo: unscaled scores, its own local-window or causal mask (GPT-Neo and GIT look
  the implementation name up in a table of their own, as Falcon does);
- GIT: scores with GIT's own additive mask (its text decoder, run on text alone);
- FSMT (an encoder-decoder): its three stacks, inputs time first, masks as booleans;
- LED (an encoder-decoder): its encoder's sliding window (Longformer's) as a mask, its
  decoder's self- and cross-attention as BART's with LED's additive masks.

These families are loaded with ``attn_implementation="eager"`` (their own
path; Falcon looks other names up in a table of its own and fails), so the
mask reaches the adapter as the family's eager code builds it.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
from torch import nn

from .capture import as_allowed, carried, core_attention

Forward = Callable[..., Any]


def _attend(
    self: Any,
    qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    mask: torch.Tensor | None,
    kwargs: Mapping[str, Any],
    scaling: float,
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``core_attention`` over ``qkv``, ``bias`` the score bias, with the forward's run
    carried on from the module's ``kwargs`` (``carried``): every adapter's one call."""
    query, key, value = qkv
    return core_attention(
        self, query, key, value, mask, scaling=scaling, position_bias=bias, **carried(kwargs)
    )


def _bloom(
    self: Any,
    hidden_states: torch.Tensor,
    residual: torch.Tensor,
    alibi: torch.Tensor,
    attention_mask: torch.Tensor | None,
    layer_past: Any = None,
    use_cache: bool = False,
    output_attentions: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``BloomAttention.forward``: scores ``alibi * beta + q·k * inv_norm_factor``."""
    from transformers.models.bloom.modeling_bloom import dropout_add

    batch, length, _ = hidden_states.shape
    query, key, value = self._reshape(self.query_key_value(hidden_states))
    if layer_past is not None:
        key, value = layer_past.update(key, value, self.layer_idx)
    bias = alibi.view(batch, self.num_heads, 1, -1) * self.beta
    context, weights = _attend(
        self, (query, key, value), attention_mask, kwargs, self.inv_norm_factor, bias
    )
    output = self.dense(context.reshape(batch, length, self.hidden_size))
    output = dropout_add(output, residual, self.hidden_dropout, self.training)
    return output, weights


def _mpt(
    self: Any,
    hidden_states: torch.Tensor,
    position_bias: torch.Tensor | None,
    cache: Any = None,
    attention_mask: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``MptAttention.forward``: scores ``q·k * softmax_scale + alibi``; its mask is True
    where a key is hidden (the inverse of the core's)."""
    batch, length = hidden_states.shape[:2]
    mixed = self.Wqkv(hidden_states)
    if self.clip_qkv:
        mixed = mixed.clamp(min=-self.clip_qkv, max=self.clip_qkv)
    query, key, value = (
        t.reshape(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        for t in mixed.chunk(3, dim=2)
    )
    if cache is not None:
        key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
    query_length = length if cache is None else length + cache.get_seq_length()
    bias = None
    if position_bias is not None:  # sliced as MPT slices it
        first_query = max(0, position_bias.size(1) - query_length)
        first_key = max(0, position_bias.size(2) - key.shape[-2])
        bias = position_bias[:, first_query:, first_key:]
    allowed = None if attention_mask is None else ~attention_mask.to(torch.bool)
    context, weights = _attend(self, (query, key, value), allowed, kwargs, self.softmax_scale, bias)
    return self.out_proj(context.reshape(batch, length, -1)), weights


def _falcon(
    self: Any,
    hidden_states: torch.Tensor,
    alibi: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None = None,
    layer_past: Any = None,
    use_cache: bool = False,
    output_attentions: bool = False,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``FalconAttention.forward`` (eager): RoPE, or ALiBi as the score bias (Falcon folds
    ALiBi into its mask as well: that part reaches the core as the mask's bias)."""
    from transformers.models.falcon import modeling_falcon

    kv_heads = self.num_heads if self.new_decoder_architecture else self.num_kv_heads
    query, key, value = self._split_heads(self.query_key_value(hidden_states))
    batch, length = query.shape[:2]
    query = query.transpose(1, 2).reshape(batch, self.num_heads, length, self.head_dim)
    key = key.transpose(1, 2).reshape(batch, kv_heads, length, self.head_dim)
    value = value.transpose(1, 2).reshape(batch, kv_heads, length, self.head_dim)
    if alibi is None:
        assert position_embeddings is not None
        cos, sin = position_embeddings
        rotate: Any = modeling_falcon.apply_rotary_pos_emb
        query, key = rotate(query, key, cos, sin)
    if layer_past is not None:
        key, value = layer_past.update(key, value, self.layer_idx)
    if alibi is None:
        scaling, bias = 1 / math.sqrt(self.head_dim), None
    else:
        scaling = self.inv_norm_factor
        bias = alibi.view(batch, self.num_heads, 1, -1) * self.inv_norm_factor
    context, weights = _attend(self, (query, key, value), attention_mask, kwargs, scaling, bias)
    return self.dense(context.reshape(batch, length, self.num_heads * self.head_dim)), weights


class _Given(NamedTuple):
    """What ``DisentangledSelfAttention.forward`` is given, past the mask."""

    hidden_states: torch.Tensor
    query_states: torch.Tensor | None
    relative_pos: torch.Tensor | None
    rel_embeddings: torch.Tensor | None


class _Disentangled(NamedTuple):
    """A DeBERTa layer's q, k, v (B, H, T, D), its scale factor and its disentangled terms."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    factor: int
    bias: torch.Tensor | None


def _disentangled(terms: Callable[[Any, _Given], _Disentangled]) -> Forward:
    """``DisentangledSelfAttention.forward`` (DeBERTa v1 and v2): scores ``q·k / sqrt(d *
    factor)`` with the content-to-position and position-to-content terms as the score
    bias, a step of its own; ``terms`` is the version's projections and terms."""

    def forward(
        self: Any,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor,
        output_attentions: bool = False,
        query_states: torch.Tensor | None = None,
        relative_pos: torch.Tensor | None = None,
        rel_embeddings: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        t = terms(self, _Given(hidden_states, query_states, relative_pos, rel_embeddings))
        scaling = 1 / math.sqrt(t.query.shape[-1] * t.factor)
        context, weights = _attend(
            self, (t.query, t.key, t.value), attention_mask.bool(), kwargs, scaling, t.bias
        )
        return context.reshape(*context.shape[:2], -1), weights

    return forward


def _deberta_v2_terms(self: Any, given: _Given) -> _Disentangled:
    """DeBERTa-v2's three projections; its terms from the module's own
    ``disentangled_attention_bias`` over q and k as (B*H, T, D)."""
    hidden_states, query_states, relative_pos, rel_embeddings = given
    heads = self.num_attention_heads
    source = hidden_states if query_states is None else query_states
    query = self.transpose_for_scores(self.query_proj(source), heads)  # (B*H, T, D)
    key = self.transpose_for_scores(self.key_proj(hidden_states), heads)
    value = self.transpose_for_scores(self.value_proj(hidden_states), heads)
    factor = 1 + ("c2p" in self.pos_att_type) + ("p2c" in self.pos_att_type)
    bias = None
    if self.relative_attention:
        rel_embeddings = self.pos_dropout(rel_embeddings)
        bias = self.disentangled_attention_bias(query, key, relative_pos, rel_embeddings, factor)
    batch = hidden_states.shape[0]

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(batch, heads, t.shape[-2], t.shape[-1])

    bias = split(bias) if isinstance(bias, torch.Tensor) else None
    return _Disentangled(split(query), split(key), split(value), factor, bias)


def _deberta_v1_terms(self: Any, given: _Given) -> _Disentangled:
    """DeBERTa (v1): one fused projection with q and v biases; its terms from the
    module's own ``disentangled_att_bias`` over the scaled q."""
    hidden_states, query_states, relative_pos, rel_embeddings = given
    from ...errors import SpecError

    if self.head_logits_proj is not None:  # mixes heads before the softmax: no one head's map
        raise SpecError(
            "DeBERTa with talking heads mixes the heads' scores before the softmax: "
            "no head has a map of its own",
            field="model",
        )
    if query_states is None:
        query, key, value = self.transpose_for_scores(self.in_proj(hidden_states)).chunk(3, dim=-1)
    else:  # as the module does: the fused weight's rows per head
        rows = self.in_proj.weight.chunk(self.num_attention_heads * 3, dim=0)
        weights = [
            torch.cat([rows[i * 3 + k] for i in range(self.num_attention_heads)], dim=0)
            for k in range(3)
        ]
        query, key, value = (
            self.transpose_for_scores(torch.matmul(w, x.t().to(dtype=w.dtype)))
            for w, x in zip(weights, (query_states, hidden_states, hidden_states), strict=True)
        )
    query = query + self.transpose_for_scores(self.q_bias[None, None, :])
    value = value + self.transpose_for_scores(self.v_bias[None, None, :])
    factor = 1 + len(self.pos_att_type)
    bias = None
    if self.relative_attention and rel_embeddings is not None and relative_pos is not None:
        scaled = query / torch.tensor(math.sqrt(query.shape[-1] * factor), dtype=query.dtype)
        terms = self.disentangled_att_bias(
            scaled, key, relative_pos, self.pos_dropout(rel_embeddings), factor
        )
        bias = terms if isinstance(terms, torch.Tensor) else None
    return _Disentangled(query, key, value, factor, bias)


def _gpt_neo(
    self: Any,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    layer_past: Any = None,
    use_cache: bool = False,
    output_attentions: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``GPTNeoSelfAttention.forward``: unscaled scores ``q·k``, its own causal (global) or
    local-window mask (the ``bias`` buffer), the model's mask on top."""
    query, key, value = (
        self._split_heads(proj(hidden_states), self.num_heads, self.head_dim)
        for proj in (self.q_proj, self.k_proj, self.v_proj)
    )
    if layer_past is not None:
        key, value = layer_past.update(key, value, self.layer_id)
    length, keys = query.shape[-2], key.shape[-2]
    allowed = self.bias[:, :, keys - length : keys, :keys]
    bias = None
    if attention_mask is not None:
        given, bias = as_allowed(attention_mask)
        allowed = allowed if given is None else allowed & given
    context, weights = _attend(self, (query, key, value), allowed, kwargs, 1.0, bias)
    output = self.out_proj(context.reshape(*context.shape[:2], -1))
    return self.resid_dropout(output), weights


def _git(
    self: Any,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    cache: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``GitSelfAttention.forward``: scores ``q·k / sqrt(d)`` plus GIT's own additive mask."""
    shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
    query, key, value = (
        proj(hidden_states).view(shape).transpose(1, 2)
        for proj in (self.query, self.key, self.value)
    )
    if cache is not None:
        key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
    context, weights = _attend(
        self, (query, key, value), attention_mask, kwargs, 1 / math.sqrt(self.attention_head_size)
    )
    return context.reshape(*context.shape[:2], self.all_head_size), weights


def _led(
    self: Any,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    is_index_masked: torch.Tensor | None = None,
    is_index_global_attn: torch.Tensor | None = None,
    is_global_attn: bool | None = None,
    output_attentions: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor | None, ...]:
    """LED's encoder self-attention (Longformer's): each query reads the keys within
    ``attention_window / 2`` of it, as a mask, scores ``q·k / sqrt(d)``.  (Longformer's
    chunks need the input padded to a multiple of the window; a mask does not:
    ``_unpadded`` keeps the encoder from padding, so the maps are the text's own.)"""
    from ...errors import SpecError

    if is_global_attn:
        raise SpecError(
            "LED with global attention (global_attention_mask) is not captured: "
            "only its sliding-window attention is",
            field="model",
        )
    batch, length, _ = hidden_states.shape
    query, key, value = (
        proj(hidden_states).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        for proj in (self.query, self.key, self.value)
    )
    position = torch.arange(length, device=hidden_states.device)
    distance = (position[:, None] - position[None, :]).abs()
    allowed = (distance <= self.one_sided_attn_window_size)[None, None]
    if is_index_masked is not None:
        allowed = allowed & ~is_index_masked[:, None, None, :]
    context, weights = _attend(
        self, (query, key, value), allowed, kwargs, 1 / math.sqrt(self.head_dim)
    )
    output = context.reshape(batch, length, self.embed_dim)
    return (output, weights) if output_attentions else (output,)


def _unpadded(
    self: Any,
    input_ids: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    pad_token_id: int,
) -> tuple[int, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``LEDEncoder._pad_to_window_size`` for ``_led``: no padding (0 added)."""
    return 0, input_ids, attention_mask, inputs_embeds


def _led_decoder(
    self: Any,
    hidden_states: torch.Tensor,
    key_value_states: torch.Tensor | None = None,
    cache: Any = None,
    attention_mask: torch.Tensor | None = None,
    output_attentions: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
    """``LEDDecoderAttention.forward`` (self- and cross-attention): scores ``q·k * scaling``
    plus LED's additive mask."""
    cross = key_value_states is not None
    batch, length, width = hidden_states.shape
    layers = cache
    if cache is not None and hasattr(cache, "is_updated"):  # an EncoderDecoderCache
        layers = cache.cross_attention_cache if cross else cache.self_attention_cache
    if cross and cache is not None and cache.is_updated.get(self.layer_idx):
        key, value = layers.layers[self.layer_idx].keys, layers.layers[self.layer_idx].values
    else:
        states = key_value_states if cross else hidden_states
        key, value = (
            proj(states).view(batch, -1, self.num_heads, self.head_dim).transpose(1, 2)
            for proj in (self.k_proj, self.v_proj)
        )
        if cache is not None:
            key, value = layers.update(key, value, self.layer_idx)
            if cross and hasattr(cache, "is_updated"):
                cache.is_updated[self.layer_idx] = True
    query = self.q_proj(hidden_states).view(batch, length, self.num_heads, -1).transpose(1, 2)
    context, weights = _attend(self, (query, key, value), attention_mask, kwargs, self.scaling)
    return self.out_proj(context.reshape(batch, length, width)), weights, cache


def _fsmt(
    self: Any,
    query: torch.Tensor,
    key: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None = None,
    layer_state: Any = None,
    attn_mask: torch.Tensor | None = None,
    output_attentions: bool | None = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """FSMT's ``Attention.forward`` (inputs time first, (T, B, C)): scores ``q·k * scaling``,
    its causal mask (-inf above the diagonal) and key padding mask as booleans."""
    length, batch, width = query.shape
    heads, head_dim = self.num_heads, self.head_dim
    cache: Any = None
    if layer_state is not None:
        cache = (
            layer_state.cross_attention_cache
            if self.encoder_decoder_attention
            else layer_state.self_attention_cache
        )
    reuse = self.encoder_decoder_attention and layer_state is not None
    if reuse and layer_state.is_updated.get(self.layer_idx):
        keys, values = cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
    else:
        states = key if self.encoder_decoder_attention else query
        keys, values = (
            proj(states).view(-1, batch, heads, head_dim).permute(1, 2, 0, 3)
            for proj in (self.k_proj, self.v_proj)
        )
        if cache is not None:
            keys, values = cache.update(keys, values, self.layer_idx, kwargs=kwargs)
            if self.encoder_decoder_attention:
                layer_state.is_updated[self.layer_idx] = True
    queries = self.q_proj(query).view(length, batch, heads, head_dim).permute(1, 2, 0, 3)
    allowed = torch.ones(batch, 1, length, keys.shape[-2], dtype=torch.bool)
    if attn_mask is not None:
        allowed = allowed & (attn_mask > torch.finfo(attn_mask.dtype).min / 2)
    if key_padding_mask is not None and key_padding_mask.dim() > 0:
        allowed = allowed & ~key_padding_mask.to(torch.bool)[:, None, None, :]
    context, weights = _attend(self, (queries, keys, values), allowed, kwargs, self.scaling)
    return self.out_proj(context.transpose(0, 1).reshape(length, batch, width)), weights


# (the family's modeling module, the attention module's class) -> the adapter for it.
ADAPTERS: dict[tuple[str, str], Forward] = {
    ("bloom", "BloomAttention"): _bloom,
    ("mpt", "MptAttention"): _mpt,
    ("falcon", "FalconAttention"): _falcon,
    ("deberta_v2", "DisentangledSelfAttention"): _disentangled(_deberta_v2_terms),
    ("deberta", "DisentangledSelfAttention"): _disentangled(_deberta_v1_terms),
    ("gpt_neo", "GPTNeoSelfAttention"): _gpt_neo,
    ("git", "GitSelfAttention"): _git,
    ("led", "LEDEncoderSelfAttention"): _led,
    ("led", "LEDDecoderAttention"): _led_decoder,
    ("fsmt", "Attention"): _fsmt,
}
# Other methods an adapter needs replaced: (module, class) -> (method name, replacement).
METHODS: dict[tuple[str, str], tuple[str, Forward]] = {
    ("led", "LEDEncoder"): ("_pad_to_window_size", _unpadded),
}
# The model types whose attention an adapter computes (loaded with their eager path).
ADAPTED_TYPES = frozenset(
    {"bloom", "mpt", "falcon", "deberta", "deberta-v2", "fsmt", "gpt_neo", "git", "led"}
)
# Families whose attention modules take their input time first, (T, B, C).
TIME_FIRST = frozenset({("fsmt", "Attention")})


def _family_class(module: nn.Module) -> tuple[str, str]:
    family = type(module).__module__.rsplit(".", 1)[-1].removeprefix("modeling_")
    return family, type(module).__name__


def install_adapters(model: nn.Module) -> int:
    """Replace the forward of each attention module an adapter knows; how many were.
    Each is marked ``adapted`` (``adapted_modules``); one whose input is time first
    ``time_first``, for the capture."""
    count = 0
    for module in model.modules():
        method = METHODS.get(_family_class(module))
        if method is not None:
            setattr(module, method[0], types.MethodType(method[1], module))
        adapter = ADAPTERS.get(_family_class(module))
        if adapter is not None:
            module.forward = types.MethodType(adapter, module)
            object.__setattr__(module, "time_first", _family_class(module) in TIME_FIRST)
            object.__setattr__(module, "adapted", True)
            count += 1
    return count


def adapted_modules(model: nn.Module) -> tuple[nn.Module, ...]:
    """The modules of ``model`` an adapter computes (``install_adapters``): a forward's
    keywords never reach them, so ``capture.handing`` hands them its run itself."""
    return tuple(m for m in model.modules() if getattr(m, "adapted", False))
