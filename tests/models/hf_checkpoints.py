"""Small random checkpoints of families only transformers implements (the ``transformers``
backend): Qwen3, Gemma 2 and 3, Phi-3, Mistral with a sliding window, OLMo 2, GPT-NeoX,
RoBERTa; each 2 layers, 32-64 wide, with a tokenizer trained on a few lines.

``make_hf(directory, name)`` writes the checkpoint ``name`` of ``HF_SPECS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tests.models.checkpoints import BOS, EOS, byte_level_tokenizer, metaspace_tokenizer

# A text longer than the sliding windows below (4 tokens), so the windows show.
LONG_TEXT = "The bank approved the loan, and the river bank was muddy."


@dataclass(frozen=True)
class HFSpec:
    """``model_type``, its config's settings, causal LM or masked LM, and the tokenizer style."""

    model_type: str
    settings: dict[str, Any] = field(default_factory=dict)
    decoder: bool = True
    byte_level: bool = False


_SMALL = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "initializer_range": 0.4,
}
_GQA = {**_SMALL, "num_key_value_heads": 2}

HF_SPECS: dict[str, HFSpec] = {
    "tiny-qwen3": HFSpec("qwen3", {**_GQA, "head_dim": 16}),
    "tiny-gemma2": HFSpec(
        "gemma2",
        {
            **_GQA,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 4,
            "attn_logit_softcapping": 2.0,
            "final_logit_softcapping": 30.0,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "tiny-gemma3": HFSpec(
        "gemma3_text",
        {
            **_GQA,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
    ),
    "tiny-phi3": HFSpec("phi3", {**_GQA, "pad_token_id": 0}),
    "tiny-mistral-window": HFSpec("mistral", {**_GQA, "sliding_window": 4}),
    "tiny-olmo2": HFSpec("olmo2", _GQA),
    "tiny-gpt-neox": HFSpec(
        "gpt_neox", {**_SMALL, "rotary_pct": 0.5, "use_parallel_residual": True}, byte_level=True
    ),
    "tiny-roberta": HFSpec(
        "roberta",
        {**_SMALL, "max_position_embeddings": 72, "type_vocab_size": 1, "pad_token_id": 1},
        decoder=False,
        byte_level=True,
    ),
}
HF_DECODERS = sorted(n for n, s in HF_SPECS.items() if s.decoder)

# Families that compute attention in their own code (an adapter runs it through the core)
# or share one attention module across layers (ALBERT).
OWN_CODE_SPECS: dict[str, HFSpec] = {
    "tiny-bloom": HFSpec("bloom", _SMALL, byte_level=True),
    "tiny-mpt": HFSpec(
        "mpt", {**_SMALL, "max_seq_len": 64, "attn_config": {"alibi": True}}, byte_level=True
    ),
    "tiny-falcon": HFSpec("falcon", {**_SMALL, "alibi": False}, byte_level=True),
    "tiny-falcon-alibi": HFSpec(
        "falcon", {**_SMALL, "alibi": True, "new_decoder_architecture": False}, byte_level=True
    ),
    "tiny-deberta-v2": HFSpec(
        "deberta-v2",
        {
            **_SMALL,
            "relative_attention": True,
            "pos_att_type": ["p2c", "c2p"],
            "position_buckets": 8,
            "max_relative_positions": 16,
            "position_biased_input": False,
            "type_vocab_size": 0,
        },
        decoder=False,
    ),
    "tiny-deberta": HFSpec(
        "deberta",
        {
            **_SMALL,
            "relative_attention": True,
            "pos_att_type": ["c2p", "p2c"],
            "max_relative_positions": 16,
            "position_biased_input": False,
            "type_vocab_size": 0,
        },
        decoder=False,
    ),
    # GPT-Neo: unscaled scores, a local layer (a window of 4) after a global one.
    "tiny-gpt-neo": HFSpec(
        "gpt_neo",
        {
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "intermediate_size": 64,
            "max_position_embeddings": 64,
            "attention_types": [[["global", "local"], 1]],
            "window_size": 4,
            "initializer_range": 0.4,
        },
        byte_level=True,
    ),
    # GIT's text decoder, run on text alone (its vision tower built small, never run).
    "tiny-git": HFSpec(
        "git",
        {
            **_SMALL,
            "vision_config": {
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_hidden_layers": 1,
                "num_attention_heads": 4,
                "image_size": 32,
                "patch_size": 16,
            },
        },
        byte_level=True,
    ),
    "tiny-albert": HFSpec(
        "albert", {**_SMALL, "embedding_size": 16, "num_hidden_groups": 1}, decoder=False
    ),
}
ALL_SPECS = {**HF_SPECS, **OWN_CODE_SPECS}


def randomize_norms(model: torch.nn.Module) -> None:
    """Random norm gains and biases (transformers' init makes them 1 and 0, or 0 for Gemma's
    ``1 + weight`` norms), so they are tested too."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                gain = name.endswith("weight") and float(param.detach().abs().mean()) > 0.5
                param.normal_(mean=1.0 if gain else 0.0, std=0.2)


def make_hf(
    directory: Path,
    name: str,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    **overrides: Any,
) -> Path:
    """The checkpoint ``name`` of ``ALL_SPECS``, saved as transformers saves it
    (``overrides`` change its config, e.g. a longer ``max_position_embeddings``)."""
    import transformers

    spec = ALL_SPECS[name]
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_level_tokenizer() if spec.byte_level else metaspace_tokenizer()
    end = EOS if spec.byte_level else "</s>"
    start = EOS if spec.byte_level else BOS
    settings = {
        "vocab_size": tokenizer.get_vocab_size(),
        "bos_token_id": tokenizer.token_to_id(start),
        "eos_token_id": tokenizer.token_to_id(end),
        "tie_word_embeddings": False,
        **spec.settings,
        **overrides,
    }
    config = transformers.AutoConfig.for_model(spec.model_type, **settings)
    torch.manual_seed(seed)
    auto = transformers.AutoModelForCausalLM if spec.decoder else transformers.AutoModelForMaskedLM
    model = auto.from_config(config)
    randomize_norms(model)
    model.to(dtype).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory
