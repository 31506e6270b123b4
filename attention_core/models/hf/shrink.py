"""A checkpoint's ``config.json`` made tiny, its structure kept: what the listing's dry run builds.

The shrinking takes a subset of the model, as if most of its heads, layers,
experts and vocabulary were cut away, so that every relation between the
config's fields still holds:

- heads: every head count (attention, key/value, Mamba, linear-attention
  heads...) is divided by one factor ``d`` (the largest that keeps them whole and
  leaves at least ``HEADS`` attention heads; one key/value head stays one);
  per-head sizes (``head_dim``, MLA's ``qk_rope_head_dim``...) stay as they are;
- widths: the hidden size and every size equal to it are divided by ``d`` (so
  ``hidden = heads * head_dim`` and ``expand * hidden = mamba_heads * mamba_head_dim``
  still hold), feed-forward sizes too (rounded up);
- layers: ``LAYERS`` of them, one of each kind in ``layer_types`` first (a hybrid
  keeps its attention layer), every per-layer list and per-layer table cut alike;
- experts: at most ``EXPERTS``, top-k and expert groups within them;
- vocabulary: at most ``VOCAB`` tokens, every token id inside it;
- nested configs (a vision-language model's ``text_config``) each on their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, TypeGuard

LAYERS = 2
HEADS = 4
VOCAB = 256
EXPERTS = 4
POSITIONS = 256
MIN_WIDTH = 128
ALIGN = 16
WINDOW = 8

_LAYER_KEYS = (
    "num_hidden_layers",
    "n_layer",
    "n_layers",
    "num_layers",
    "encoder_layers",
    "decoder_layers",
    "num_decoder_layers",
)
# The main attention head count (the first present), the one ``HEADS`` bounds.
_MAIN_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads")
_HEAD_COUNT = re.compile(r"(heads|^n_head|^n_head_kv|query_groups|query_group_num)$")
_WIDTHS = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "hidden_dim", "emb_dim")
_FFN = re.compile(
    r"(intermediate_size|ffn_dim|^d_ff|^n_inner|^d_inner|ffn_hidden_size|dim_ff|mlp_dim)$"
)
_DIMENSION = re.compile(r"(size|dim|width|embd|channels|inner)$")
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "max_sequence_length",
    "seq_length",
    "max_encoder_position_embeddings",
    "max_decoder_position_embeddings",
    "max_source_positions",
    "max_target_positions",
)
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "top_k",
    "moe_top_k",
    "moe_k",
    "num_selected_experts",
)
_LABELS = ("id2label", "label2id")
_GROUP_KEYS = ("n_group", "num_expert_group", "topk_group")
# Sizes, not settings: the dry run's verdict is kept per everything else.
SIZE_KEYS = frozenset(
    (
        *_LAYER_KEYS,
        *_WIDTHS,
        *_EXPERT_KEYS,
        *_TOP_K_KEYS,
        *_POSITION_KEYS,
        "vocab_size",
        "layer_types",
        "attention_window",
        "text_config",
        "vision_config",
        "audio_config",
        "_name_or_path",
        "architectures",
        "transformers_version",
    )
)


def is_size(key: str) -> bool:
    """Whether ``key`` holds a size (not a setting): counts, widths, per-layer lists."""
    return key in SIZE_KEYS or bool(_HEAD_COUNT.search(key) or _FFN.search(key))


def shrunk(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` (a parsed ``config.json``) made tiny, its relations kept; nested configs too."""
    out = _shrunk(raw)
    for key, value in raw.items():
        if isinstance(value, Mapping) and key.endswith("_config") and not _per_layer(value):
            out[key] = shrunk(value)
    return out


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shrunk(raw: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    _cut_layers(raw, out)
    _cut_heads(raw, out)
    _cut_experts(out)
    for key in _POSITION_KEYS:
        if _int(out.get(key)):
            out[key] = min(out[key], POSITIONS)
    for key in ("rope_scaling", "rope_parameters"):  # Qwen2-VL: sections of head_dim / 2
        rope = out.get(key)
        if isinstance(rope, Mapping) and isinstance(rope.get("mrope_section"), list):
            half = _head_dim(out) // 2
            out[key] = {**rope, "mrope_section": _sections(rope["mrope_section"], half)}
    window = out.get("attention_window")  # Longformer, LED: pads inputs to a multiple of it
    if _int(window):
        out["attention_window"] = min(window, WINDOW)
    elif isinstance(window, list):
        out["attention_window"] = [min(w, WINDOW) if _int(w) else w for w in window]
    if _int(out.get("num_kv_shared_layers")):  # Gemma 3n: the last layers reuse others' keys
        out["num_kv_shared_layers"] = 0
    _cut_vocabulary(raw, out)
    return out


def _layer_count(raw: Mapping[str, Any]) -> int | None:
    return next((raw[k] for k in _LAYER_KEYS if _int(raw.get(k))), None)


def _kept_layers(raw: Mapping[str, Any], layers: int) -> list[int]:
    """The layers kept: the first of each kind in ``layer_types``, then the first ones."""
    kinds = raw.get("layer_types")
    kept: list[int] = []
    if isinstance(kinds, list) and len(kinds) == layers:
        seen: set[str] = set()
        for i, kind in enumerate(kinds):
            if str(kind) not in seen:
                seen.add(str(kind))
                kept.append(i)
    for i in range(layers):
        if len(kept) >= LAYERS:
            break
        if i not in kept:
            kept.append(i)
    return sorted(kept)


def _cut_layers(raw: Mapping[str, Any], out: dict[str, Any]) -> None:
    layers = _layer_count(raw)
    if layers is None:
        return
    kept = _kept_layers(raw, layers)
    for key in _LAYER_KEYS:
        if _int(raw.get(key)):
            out[key] = min(raw[key], len(kept)) if raw[key] != layers else len(kept)
    for key, value in raw.items():
        if isinstance(value, list) and len(value) == layers > len(kept):
            out[key] = [value[i] for i in kept]  # layer_types, mlp_layer_types...
        elif key not in _LABELS and isinstance(value, Mapping) and _per_layer(value):
            new = {str(kept.index(int(k))): v for k, v in value.items() if int(k) in kept}
            out[key] = {int(k) if _int(next(iter(value))) else k: v for k, v in new.items()}


def _per_layer(table: Mapping[Any, Any]) -> bool:
    """A table keyed by layer index (Gemma 4's ``per_layer_config``)."""
    return bool(table) and all(_int(k) or (isinstance(k, str) and k.isdigit()) for k in table)


def _divisor(heads: int | None, counts: list[int], widths: list[int]) -> int:
    """The largest ``d`` dividing every head count and width, leaving at least ``HEADS``
    attention heads (without heads: a width of at least ``MIN_WIDTH``)."""
    gcd = 0
    for value in (*counts, *widths):  # one key/value head (MQA) stays one
        gcd = math.gcd(gcd, value) if value > 1 else gcd
    best = 1
    for d in range(1, gcd + 1):
        enough = heads // d >= HEADS if heads else min(widths) // d >= MIN_WIDTH
        if gcd % d == 0 and enough:
            best = d
    return best


def _ratio(raw: Mapping[str, Any], counts: list[int], widths: list[int]) -> Fraction:
    """The factor heads and widths are cut by: ``1 / d`` (``_divisor``), or ``HEADS / heads``
    when no whole factor leaves at most ``4 * HEADS`` heads (Falcon-7B's 71): each head
    then keeps its width, the other sizes are rounded up (``_whole``)."""
    heads = next((raw[k] for k in _MAIN_HEADS if _int(raw.get(k))), None)
    if (heads is not None and heads <= HEADS) or not widths:
        return Fraction(1)
    d = _divisor(heads, counts, widths)
    if heads is not None and heads // d > 4 * HEADS:
        return Fraction(HEADS, heads)
    return Fraction(1, d)


def _cut_heads(raw: Mapping[str, Any], out: dict[str, Any]) -> None:
    counts = {k: v for k, v in raw.items() if _int(v) and v > 0 and _HEAD_COUNT.search(k)}
    widths = {k: raw[k] for k in _WIDTHS if _int(raw.get(k)) and raw[k] > 0}
    ratio = _ratio(raw, list(counts.values()), list(widths.values()))
    if ratio == 1:
        return
    hidden = set(widths.values())
    for key, value in raw.items():
        if not _int(value) or value <= 0:
            continue
        if key in counts:
            out[key] = max(1, math.floor(value * ratio))
        elif key in widths or _FFN.search(key) or (value in hidden and _DIMENSION.search(key)):
            out[key] = _whole(value * ratio)  # widths and what is tied to them, FFNs
    for key, value in raw.items():  # parts of the width (Reformer's axial_pos_embds_dim)
        if isinstance(value, list) and value and all(_int(v) for v in value):
            parts = [v * ratio for v in value]
            if (
                sum(value) in hidden
                and _DIMENSION.search(key)
                and all(p.denominator == 1 for p in parts)
            ):
                out[key] = [int(p) for p in parts]


def _whole(size: Fraction) -> int:
    """``size`` if whole, else rounded up to a multiple of ``ALIGN`` (grouped matmuls of
    experts need rows of 16 bytes, as real checkpoints' sizes give them)."""
    if size.denominator == 1:
        return int(size)
    return math.ceil(size / ALIGN) * ALIGN


def _cut_experts(out: dict[str, Any]) -> None:
    experts = next((out[k] for k in _EXPERT_KEYS if _int(out.get(k))), None)
    if experts is None:
        return
    kept = min(experts, EXPERTS)
    for key in _EXPERT_KEYS:
        if _int(out.get(key)):
            out[key] = kept
    for key in _TOP_K_KEYS:
        if key in out and (out[key] is None or _int(out[key])):
            out[key] = min(out[key] or 2, kept, 2)
    for key in _GROUP_KEYS:  # DeepSeek's expert groups: one group, all experts in it
        if _int(out.get(key)):
            out[key] = 1


def _cut_vocabulary(raw: Mapping[str, Any], out: dict[str, Any]) -> None:
    if _int(out.get("vocab_size")):
        out["vocab_size"] = min(out["vocab_size"], VOCAB)
    for key, value in raw.items():  # token ids past the small vocabulary: small ones
        if key.endswith("token_id") and _int(value) and value >= VOCAB:
            out[key] = 2
        elif key.endswith("token_id") and isinstance(value, list):
            out[key] = [v if _int(v) and v < VOCAB else 2 for v in value]


def _head_dim(config: Mapping[str, Any]) -> int:
    head_dim = config.get("head_dim")
    if _int(head_dim):
        return int(head_dim)
    heads = next((config[k] for k in _MAIN_HEADS if _int(config.get(k))), 1)
    width = next((config[k] for k in _WIDTHS if _int(config.get(k))), 0)
    return int(width // max(heads, 1))


def _sections(sections: list[Any], total: int) -> list[Any]:
    """``sections`` scaled to sum to ``total`` (the last one takes the rounding)."""
    if not all(_int(x) and x > 0 for x in sections) or sum(sections) <= total:
        return sections
    scaled = [max(1, x * total // sum(sections)) for x in sections[:-1]]
    return [*scaled, max(1, total - sum(scaled))]
