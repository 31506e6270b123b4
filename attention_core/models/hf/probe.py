"""Whether a family's attention can be captured, decided when a model is listed.

A checkpoint is listed as supported only if its family passes a dry run: a
tiny random model of the same class, built from the checkpoint's own
``config.json`` with its sizes shrunk (2 layers, 4 heads of 128, small MLPs
and vocabulary), loaded as the app loads it (our attention, or an adapter)
and run once on two tokens; every layer of every stack must be captured.  The
verdict is kept per model type, kind, transformers version and the config's
non-size settings (ALiBi or RoPE, shared layers...), so each family is tried
once per process.

The dry run decides only what it can show: when the tiny model cannot be
built or its forward pass fails (a setting the shrinking does not know), the
verdict is ``None``, and the load's own checks (the same ones, on the real
weights) decide, their failure then listed as the reason.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import torch

from ...errors import SpecError

LAYERS = 2
HEADS = 4
HEAD_DIM = 128
VOCAB = 256
FFN = 64
EXPERTS = 4

_LAYER_KEYS = (
    "num_hidden_layers",
    "n_layer",
    "n_layers",
    "num_layers",
    "encoder_layers",
    "decoder_layers",
    "num_decoder_layers",
)
_WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim")
_FFN_KEYS = (
    "intermediate_size",
    "ffn_dim",
    "d_ff",
    "n_inner",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "expert_intermediate_size",
)
_HEAD_KEYS = (
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_heads",
    "encoder_attention_heads",
    "decoder_attention_heads",
)
_KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
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
POSITIONS = 256
WINDOW = 8
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "top_k", "moe_top_k", "num_selected_experts")
_SIZE_KEYS = frozenset(
    (
        *_LAYER_KEYS,
        *_WIDTH_KEYS,
        *_FFN_KEYS,
        *_HEAD_KEYS,
        *_KV_KEYS,
        *_EXPERT_KEYS,
        *_TOP_K_KEYS,
        *_POSITION_KEYS,
        "head_dim",
        "d_kv",
        "vocab_size",
        "layer_types",
        "embedding_size",
        "attention_window",
        "text_config",
        "vision_config",
        "audio_config",
        "_name_or_path",
        "architectures",
        "transformers_version",
    )
)

_verdicts: dict[str, str | None] = {}
_lock = threading.Lock()


def shrunk(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` (a parsed ``config.json``) with its sizes made tiny, its settings kept;
    nested configs (a multimodal model's ``text_config``, ``vision_config``) too."""
    out = _shrunk_sizes(raw)
    for key, value in raw.items():
        if isinstance(value, Mapping) and key.endswith("_config"):
            out[key] = shrunk(value)
    return out


def _shrunk_sizes(raw: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    for key in _LAYER_KEYS:
        if isinstance(out.get(key), int):
            out[key] = min(out[key], LAYERS)
    heads = next((out[k] for k in _HEAD_KEYS if isinstance(out.get(k), int)), HEADS)
    kv = next((out[k] for k in _KV_KEYS if isinstance(out.get(k), int)), heads)
    new_heads = min(heads, HEADS)
    new_kv = new_heads if kv >= heads else max(1, min(kv, new_heads // 2))
    for key in _HEAD_KEYS:
        if isinstance(out.get(key), int):
            out[key] = new_heads
    for key in _KV_KEYS:
        if isinstance(out.get(key), int):
            out[key] = new_kv
    for key in _WIDTH_KEYS:
        if isinstance(out.get(key), int):
            out[key] = new_heads * HEAD_DIM
    if isinstance(out.get("head_dim"), int):
        out["head_dim"] = HEAD_DIM
    if isinstance(out.get("d_kv"), int):
        out["d_kv"] = HEAD_DIM
    for key in _FFN_KEYS:
        if isinstance(out.get(key), int):
            out[key] = FFN
    for key in _POSITION_KEYS:
        if isinstance(out.get(key), int):
            out[key] = min(out[key], POSITIONS)
    for key in _EXPERT_KEYS:
        if isinstance(out.get(key), int):
            out[key] = min(out[key], EXPERTS)
    for key in _TOP_K_KEYS:
        if isinstance(out.get(key), int):
            out[key] = min(out[key], 2)
    for key in ("rope_scaling", "rope_parameters"):  # Qwen2-VL: sections of head_dim / 2
        rope = out.get(key)
        if isinstance(rope, Mapping) and isinstance(rope.get("mrope_section"), list):
            out[key] = {**rope, "mrope_section": _sections(rope["mrope_section"], HEAD_DIM // 2)}
    window = out.get("attention_window")  # Longformer, LED: pads inputs to a multiple of it
    if isinstance(window, int):
        out["attention_window"] = min(window, WINDOW)
    elif isinstance(window, list):
        out["attention_window"] = [min(w, WINDOW) if isinstance(w, int) else w for w in window]
    if isinstance(out.get("embedding_size"), int):
        out["embedding_size"] = HEAD_DIM
    layers = next((raw[k] for k in _LAYER_KEYS if isinstance(raw.get(k), int)), None)
    for key, value in raw.items():  # per-layer lists (layer_types, mlp_layer_types...)
        if isinstance(value, list) and layers is not None and len(value) == layers > LAYERS:
            out[key] = value[:LAYERS]
    if isinstance(out.get("vocab_size"), int):
        out["vocab_size"] = min(out["vocab_size"], VOCAB)
    for key, value in raw.items():  # token ids past the small vocabulary: small ones
        if key.endswith("token_id") and isinstance(value, int) and value >= VOCAB:
            out[key] = 2
        elif key.endswith("token_id") and isinstance(value, list):
            out[key] = [v if isinstance(v, int) and v < VOCAB else 2 for v in value]
    return out


def _sections(sections: list[Any], total: int) -> list[Any]:
    """``sections`` scaled to sum to ``total`` (the last one takes the rounding)."""
    if not all(isinstance(x, int) and x > 0 for x in sections) or sum(sections) <= total:
        return sections
    scaled = [max(1, x * total // sum(sections)) for x in sections[:-1]]
    return [*scaled, max(1, total - sum(scaled))]


def _key(raw: Mapping[str, Any], kind: str) -> str:
    import transformers

    settings = {k: v for k, v in raw.items() if k not in _SIZE_KEYS and "token_id" not in k}
    return json.dumps([kind, transformers.__version__, settings], sort_keys=True, default=str)


def verdict(raw: Mapping[str, Any], kind: str) -> str | None:
    """Why a checkpoint of this config cannot be captured (None: it can, or the dry run
    could not tell); one dry run per family and settings."""
    key = _key(raw, kind)
    with _lock:
        if key in _verdicts:
            return _verdicts[key]
    found = dry_run(raw, kind)
    with _lock:
        _verdicts[key] = found
    return found


def check(raw: Mapping[str, Any], kind: str) -> None:
    """``SpecError`` with the dry run's reason when the family cannot be captured."""
    reason = verdict(raw, kind)
    if reason is not None:
        raise SpecError(reason, field="model")


def build_tiny(raw: Mapping[str, Any], kind: str) -> torch.nn.Module:
    """A tiny random model of the checkpoint's class, loaded as the app loads it."""
    from transformers import CONFIG_MAPPING

    from .adapters import install_adapters
    from .capture import register
    from .language_model import attention_implementation, auto_class

    register()
    config = CONFIG_MAPPING[raw["model_type"]].from_dict(shrunk(raw))
    auto = auto_class(str(raw["model_type"]), kind)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        model: torch.nn.Module = auto.from_config(
            config,
            attn_implementation=attention_implementation(str(raw["model_type"])),
            dtype=torch.float32,
        )
    finally:
        torch.random.set_rng_state(state)
    install_adapters(model)
    return model.eval().requires_grad_(False)


def dry_run(raw: Mapping[str, Any], kind: str) -> str | None:
    """The reason a tiny model of this family fails the load's capture checks, or None."""
    from .language_model import TransformersLM
    from .seq2seq import ForwardFailed, check_stacks

    family = f"model_type {raw.get('model_type')!r}"
    try:
        model = build_tiny(raw, kind)
    except Exception:  # noqa: BLE001 - the shrinking does not fit this family: undecided
        return None
    try:
        if kind == "encoder-decoder":
            start = getattr(model.config, "decoder_start_token_id", None)
            check_stacks(model, family, start if isinstance(start, int) else 0)
        else:
            TransformersLM(model, "encoder" if kind == "encoder" else "decoder", family)
    except ForwardFailed:
        return None  # maybe the shrinking's fault: the load's own check decides
    except SpecError as exc:
        return exc.message
    except Exception:  # noqa: BLE001 - a decoder's or encoder's forward failed: as above
        return None
    return None
