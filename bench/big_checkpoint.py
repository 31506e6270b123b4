"""Random bfloat16 checkpoints of real big models' shapes, written tensor by tensor.

    .venv/bin/python bench/big_checkpoint.py llama-3.2-3b /work/bigckpt

Llama-3.2-3B's shape (6.4 GB in bfloat16) and Llama-3.1-8B's (16 GB), Qwen3-8B's
(16.4 GB, through the transformers backend) and tiny ones of both families: the
safetensors header is written first (the names and shapes come from the
config alone), then each tensor is drawn (Normal(0, 0.02), RMSNorm gains 1)
and appended, so at most one tensor (the 1 GB embedding) is in memory, never
two copies of the model.  Beside it: ``config.json`` (transformers' Llama
config) and a word-level ``tokenizer.json`` (``w0`` .. ``w999``: a text of n
words is n tokens).  Written under ``directory/<shape>``; never in the repository.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path
from typing import Any

import torch

SHAPES: dict[str, dict[str, Any]] = {
    # A few MB, to try the scripts out.
    "llama-tiny": {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "tie_word_embeddings": False,
        "rope_scaling": None,
    },
    "llama-3.2-3b": {
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 28,
        "num_attention_heads": 24,
        "num_key_value_heads": 8,
        "tie_word_embeddings": True,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
    "llama-3.1-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
}
# Qwen3's shapes (q and k normed per head: ``self_attn.q_norm`` / ``k_norm``), a family only
# transformers implements here: the transformers backend's side of bench_gpu_big.py.
QWEN3 = {
    "model_type": "qwen3",
    "architectures": ["Qwen3ForCausalLM"],
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
    "use_sliding_window": False,
    "sliding_window": None,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "tie_word_embeddings": False,
}
SHAPES |= {
    "qwen3-tiny": {
        **QWEN3,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
    },
    "qwen3-8b": {
        **QWEN3,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_window_layers": 36,
    },
}
COMMON = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 128256,
    "head_dim": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "attention_bias": False,
    "mlp_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "dtype": "bfloat16",
}
WORDS = 1000
STD = 0.02


def config_of(shape: str) -> dict[str, Any]:
    return {**COMMON, **SHAPES[shape]}


def tensor_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor ``LlamaForCausalLM`` (or ``Qwen3ForCausalLM``: q and k norms too)
    saves, in its order, from the config alone."""
    C, F = config["hidden_size"], config["intermediate_size"]
    H, H_kv, D = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (config["vocab_size"], C)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (C,),
            p + "self_attn.q_proj.weight": (H * D, C),
            p + "self_attn.k_proj.weight": (H_kv * D, C),
            p + "self_attn.v_proj.weight": (H_kv * D, C),
            p + "self_attn.o_proj.weight": (C, H * D),
            **(
                {p + "self_attn.q_norm.weight": (D,), p + "self_attn.k_norm.weight": (D,)}
                if config["model_type"] == "qwen3"
                else {}
            ),
            p + "post_attention_layernorm.weight": (C,),
            p + "mlp.gate_proj.weight": (F, C),
            p + "mlp.up_proj.weight": (F, C),
            p + "mlp.down_proj.weight": (C, F),
        }
    shapes["model.norm.weight"] = (C,)
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (config["vocab_size"], C)
    return shapes


def write_weights(path: Path, shapes: dict[str, tuple[int, ...]], seed: int = 0) -> int:
    """The safetensors file, one tensor drawn and written at a time; returns its data bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = 2 * int(torch.tensor(shape).prod())
        header[name] = {
            "dtype": "BF16",
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    # Drawn on the GPU where there is one (16 GB of bf16 in seconds, not a minute).
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator(device).manual_seed(seed)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                tensor = torch.ones(shape, dtype=torch.bfloat16)
            else:
                drawn = torch.empty(shape, dtype=torch.bfloat16, device=device)
                tensor = drawn.normal_(0, STD, generator=generator).cpu()
            f.write(tensor.view(torch.uint8).numpy().tobytes())
            del tensor
    partial.replace(path)
    return offset


def write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0} | {f"w{i}": i + 1 for i in range(WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(path))


def text_of(tokens: int) -> str:
    """A text of exactly ``tokens`` tokens under ``write_tokenizer``'s tokenizer."""
    return " ".join(f"w{(i * 7919) % WORDS}" for i in range(tokens))


def make(shape: str, root: Path) -> Path:
    """``root/shape``, written unless its weights are there already."""
    directory = root / shape
    directory.mkdir(parents=True, exist_ok=True)
    config = config_of(shape)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if not (directory / "tokenizer.json").is_file():
        write_tokenizer(directory / "tokenizer.json")
    weights = directory / "model.safetensors"
    partial = weights.with_name(weights.name + ".partial")
    while partial.is_file() and not weights.is_file():  # another process is writing it
        print(f"waiting for {partial} to be written...", file=sys.stderr, flush=True)
        time.sleep(30)
    if not weights.is_file():
        write_weights(weights, tensor_shapes(config))
    return directory


def stored_bytes(directory: Path) -> int:
    shapes = tensor_shapes(json.loads((directory / "config.json").read_text()))
    return sum(2 * int(torch.tensor(s).prod()) for s in shapes.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("root", type=Path)
    args = parser.parse_args()
    directory = make(args.shape, args.root)
    print(directory, f"{stored_bytes(directory) / 1e9:.2f} GB", file=sys.stderr)


if __name__ == "__main__":
    main()
