"""The dry run's shrinking (``hf.shrink``) keeps a config's structure: per-head sizes,
the relations between widths and head counts, one layer of each kind, experts within
top-k, per-layer tables and token ids inside the small vocabulary."""

from __future__ import annotations

from typing import Any

from attention_core.models.hf.shrink import HEADS, LAYERS, VOCAB, is_size, shrunk
from tests.requires import require

transformers = require("transformers")


def _defaults(model_type: str) -> dict[str, Any]:
    from transformers import CONFIG_MAPPING

    config: dict[str, Any] = CONFIG_MAPPING[model_type]().to_dict()
    return config


def test_heads_are_cut_and_each_head_keeps_its_size() -> None:
    raw = _defaults("deepseek_v3")  # MLA: head_dim = qk_rope_head_dim, 128 heads of 7168
    out = shrunk(raw)
    assert out["num_attention_heads"] == HEADS
    d = raw["num_attention_heads"] // HEADS
    assert out["hidden_size"] == raw["hidden_size"] // d  # the width per head kept
    for key in ("head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        assert out[key] == raw[key]
    assert out["num_hidden_layers"] == LAYERS
    assert out["n_routed_experts"] == 4 and out["num_experts_per_tok"] <= 4
    assert (out["n_group"], out["topk_group"]) == (1, 1)  # the kept experts in one group


def test_grouped_query_heads_stay_grouped() -> None:
    out = shrunk({"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096})
    assert (out["num_attention_heads"], out["num_key_value_heads"]) == (4, 1)
    assert out["hidden_size"] == 512
    one = shrunk({"num_attention_heads": 64, "num_key_value_heads": 1, "hidden_size": 4096})
    assert (one["num_attention_heads"], one["num_key_value_heads"]) == (4, 1)


def test_sizes_tied_to_the_width_follow_it() -> None:
    raw = {"num_attention_heads": 12, "hidden_size": 768, "embedding_size": 768}
    out = shrunk(raw)  # SqueezeBERT: embedding_size must equal hidden_size
    assert out["embedding_size"] == out["hidden_size"] == 256
    axial = shrunk({"num_attention_heads": 8, "hidden_size": 256, "axial_pos_embds_dim": [64, 192]})
    assert sum(axial["axial_pos_embds_dim"]) == axial["hidden_size"]  # Reformer


def test_a_hybrid_keeps_one_layer_of_each_kind() -> None:
    kinds = ["linear_attention"] * 3 + ["full_attention"]
    raw = {
        "num_hidden_layers": 8,
        "layer_types": kinds * 2,
        "mlp_types": [f"mlp{i}" for i in range(8)],
        "per_layer_config": {"3": {"head_dim": 64}, "7": {"head_dim": 64}},
    }
    out = shrunk(raw)
    assert out["num_hidden_layers"] == 2
    assert out["layer_types"] == ["linear_attention", "full_attention"]
    assert out["mlp_types"] == ["mlp0", "mlp3"]  # the same layers of every per-layer list
    assert out["per_layer_config"] == {"1": {"head_dim": 64}}  # layer 3 is now layer 1


def test_token_ids_stay_inside_the_small_vocabulary() -> None:
    out = shrunk({"vocab_size": 151936, "eos_token_id": [151645, 3], "pad_token_id": 151643})
    assert out["vocab_size"] == VOCAB
    assert out["eos_token_id"] == [2, 3] and out["pad_token_id"] == 2


def test_nested_configs_are_shrunk_each_on_their_own() -> None:
    raw = _defaults("qwen2_vl")  # its text model: 64 heads of 128, 8 key/value heads
    out = shrunk(raw)
    text = out["text_config"]
    assert (text["num_attention_heads"], text["num_key_value_heads"]) == (8, 1)  # 8 per group
    assert text["hidden_size"] == 8 * 128
    assert text["num_hidden_layers"] == LAYERS
    sections = (out.get("rope_parameters") or text.get("rope_parameters") or {}).get(
        "mrope_section"
    )
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    assert sections is None or sum(sections) == head_dim // 2  # M-RoPE covers half a head


def test_sizes_are_not_settings() -> None:
    assert is_size("num_key_value_heads") and is_size("intermediate_size")
    assert not is_size("alibi") and not is_size("head_dim")  # head_dim is kept: a setting


def test_a_prime_head_count_keeps_each_heads_width() -> None:
    """Falcon-7B: 71 heads of 64 (no whole factor): 4 heads of 64, sizes rounded up."""
    raw = {"num_attention_heads": 71, "num_kv_heads": 71, "hidden_size": 4544}
    out = shrunk({**raw, "ffn_hidden_size": 18176, "moe_intermediate_size": 1000})
    assert (out["num_attention_heads"], out["num_kv_heads"], out["hidden_size"]) == (4, 4, 256)
    assert out["ffn_hidden_size"] == 1024  # 18176 * 4 / 71: whole
    assert out["moe_intermediate_size"] % 16 == 0  # not whole: 16-aligned rows for experts


def test_up_to_16_heads_keep_a_whole_factor() -> None:
    """GLM-4-MoE's 96 heads on 8 key/value heads: 12 on 1, every size divided by 8."""
    raw = {"num_attention_heads": 96, "num_key_value_heads": 8, "hidden_size": 4096}
    out = shrunk({**raw, "moe_intermediate_size": 1408})
    assert (out["num_attention_heads"], out["num_key_value_heads"]) == (12, 1)
    assert (out["hidden_size"], out["moe_intermediate_size"]) == (512, 176)
