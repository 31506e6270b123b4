"""The token limit per model: its context, or what the device's memory lets the long path keep."""

from __future__ import annotations

from pathlib import Path

from attention_core.models import ModelRegistry
from attention_core.models.checkpoints.token_budget import kept_bytes_per_token, token_limit
from attention_core.models.registry.family_table import Sizes

# Llama-3.1-8B's shape: 32 layers, 32 query heads on 8 key/value heads of 128, 128k context.
LLAMA_8B = Sizes(
    layers=32,
    heads=32,
    kv_heads=8,
    hidden_size=4096,
    head_dim=128,
    max_positions=131072,
    vocab_size=128256,
)
GB = 10**9


def test_the_limit_is_what_the_kept_q_and_k_may_take() -> None:
    assert kept_bytes_per_token(LLAMA_8B) == 32 * (32 + 8) * 128 * 4  # 655,360 bytes
    # 24 GB machine, 16 GB of bf16 weights: half of the 8 GB left, 655,360 bytes a token.
    assert token_limit(LLAMA_8B, 16 * GB, 24 * GB) == 4 * GB // 655_360 == 6103
    # An 80 GB GPU: 32 GB for q and k, ~48,800 tokens; a 141 GB one reads its whole context.
    assert token_limit(LLAMA_8B, 16 * GB, 80 * GB) == 32 * GB // 655_360
    assert token_limit(LLAMA_8B, 16 * GB, 400 * GB) == 131072
    assert token_limit(LLAMA_8B, 30 * GB, 24 * GB) == 3  # no room: the least an input is


def test_without_a_setting_each_model_reads_its_context(checkpoints: Path) -> None:
    registry = ModelRegistry(
        include_package=False, builtin_dir=None, env_paths=[checkpoints], max_tokens=None
    )
    model = registry.load("tiny-gpt2")
    assert model.max_tokens == 48  # its n_positions: this machine's memory holds far more
    capped = ModelRegistry(
        include_package=False, builtin_dir=None, env_paths=[checkpoints], max_tokens=20
    )
    assert capped.load("tiny-gpt2").max_tokens == 20
