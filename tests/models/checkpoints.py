"""Small random checkpoints in Hugging Face layout, made here (no download).

``transformers`` builds a random model from a config and writes it with
``save_pretrained``; the ``tokenizers`` library trains a tokenizer on a few
lines.  The session fixture ``checkpoints`` (tests/models/conftest.py) makes
each once; other test directories may call these functions themselves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LINES = [
    "The cat sat on the mat because it was tired.",
    "The bank approved the loan, and the river bank was muddy.",
    "A dog ran in the park; the children laughed at it.",
    "Attention is how a word's representation comes to depend on its neighbours.",
    "Money in the bank, fish in the stream, mud on the shore.",
    "She said: café, naïve, 😀 and 東京 are words too.",
] * 4
EOS = "<|endoftext|>"
BOS = "<s>"


def byte_level_tokenizer(vocab_size: int = 320) -> Any:
    """A GPT-2-style byte-level BPE (spaces as ``Ġ``) with ``<|endoftext|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(LINES, trainer)
    return tokenizer


def metaspace_tokenizer(vocab_size: int = 160) -> Any:
    """A SentencePiece-style BPE (spaces as ``▁``) that puts ``<s>`` (BOS) first, as Llama's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<unk>", BOS, "</s>"], show_progress=False
    )
    tokenizer.train_from_iterator(LINES, trainer)
    bos = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos)]
    )
    return tokenizer


def randomize_norms(model: torch.nn.Module) -> None:
    """Random LayerNorm/RMSNorm gains and all biases (transformers' init makes them 1 and 0),
    so the norms and biases are tested too."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "ln_" in name or "norm" in name or name.endswith("bias"):
                param.normal_(mean=1.0 if name.endswith("weight") else 0.0, std=0.2)


def make_gpt2(
    directory: Path,
    *,
    seed: int = 0,
    n_positions: int = 48,
    n_embd: int = 32,
    n_layer: int = 2,
    n_head: int = 4,
    dtype: torch.dtype = torch.float32,
    initializer_range: float = 0.4,
    **overrides: Any,
) -> Path:
    """A random GPT-2 with a byte-level tokenizer, saved as transformers would save it.

    Weights are 20x transformers' default scale (``initializer_range`` 0.4): the
    next-token distributions are peaked and varied, so greedy decoding writes
    different tokens with no near-ties that float rounding could flip.
    """
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = byte_level_tokenizer()
    eos = tokenizer.token_to_id(EOS)
    config = transformers.GPT2Config(
        vocab_size=tokenizer.get_vocab_size(),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=eos,
        eos_token_id=eos,
        initializer_range=initializer_range,
        **overrides,
    )
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(config)
    randomize_norms(model)
    model.to(dtype).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


LLAMA_CLASSES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
}


def make_llama(
    directory: Path,
    *,
    model_type: str = "llama",
    seed: int = 0,
    max_position_embeddings: int = 64,
    hidden_size: int = 32,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    rope_theta: float = 10000.0,
    rope_scaling: dict[str, Any] | None = None,
    dtype: torch.dtype = torch.float32,
    initializer_range: float = 0.4,
    **overrides: Any,
) -> Path:
    """A random Llama-family model (``model_type`` llama, mistral or qwen2) with a
    SentencePiece-style tokenizer that starts every text with ``<s>``, saved as
    transformers would save it.

    Defaults: grouped-query attention (4 query heads on 2 kv heads), untied
    embeddings, a 64-position context; ``overrides`` go to the config (a
    ``vocab_size`` below the tokenizer's is for model-only tests).  Weights at
    20x transformers' scale, as ``make_gpt2``'s, so greedy decoding has no
    near-ties.
    """
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = metaspace_tokenizer()
    config_class, model_class = (getattr(transformers, n) for n in LLAMA_CLASSES[model_type])
    rope = dict(rope_scaling or {"rope_type": "default"})
    settings: dict[str, Any] = {
        "vocab_size": tokenizer.get_vocab_size(),
        "hidden_size": hidden_size,
        "intermediate_size": 2 * hidden_size,
        "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads,
        "num_key_value_heads": num_key_value_heads,
        "max_position_embeddings": max_position_embeddings,
        "rope_parameters": {**rope, "rope_theta": rope_theta},
        "bos_token_id": tokenizer.token_to_id(BOS),
        "eos_token_id": tokenizer.token_to_id("</s>"),
        "initializer_range": initializer_range,
        "tie_word_embeddings": False,
        **overrides,
    }
    torch.manual_seed(seed)
    model = model_class(config_class(**settings))
    randomize_norms(model)
    model.to(dtype).save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def write_config(directory: Path, config: dict[str, Any]) -> Path:
    """A directory holding only a ``config.json`` (for listings of unsupported models)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def eager_attentions(model_dir: Path, input_ids: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """transformers' eager attention of ``input_ids`` through the causal LM at ``model_dir``,
    (1, H, T, T) per layer: the reference the app's maps are checked against."""
    from tests.requires import require

    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = require("transformers")
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32
    ).eval()
    with torch.inference_mode():
        return tuple(hf(torch.tensor([input_ids]), output_attentions=True).attentions)
