"""Read a BERT checkpoint's safetensors into plain tensors, prepared once for speed.

The tensors are read memory-mapped by ``..safetensors_io`` (one file or the
shards of an index).  At load time the query, key and value Linear layers of
every layer are fused into one (3*hidden, hidden) matrix so a layer does one
projection GEMM instead of three.  Every tensor keeps its stored dtype; a 16-bit
layer is cast to float32 for its own forward only (``weight_dtype.float32_copy``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ....errors import SpecError
from ...checkpoints.safetensors_io import load_checkpoint_tensors
from .config import EncoderConfig

# Prefixes some checkpoints put before the BertModel keys (BertForMaskedLM, …).
_PREFIXES = ("bert.", "model.")


@dataclass(frozen=True)
class EmbeddingWeights:
    word: torch.Tensor  # (vocab, hidden)
    position: torch.Tensor  # (max_positions, hidden)
    token_type: torch.Tensor  # (type_vocab, hidden)
    norm_weight: torch.Tensor  # (hidden,)
    norm_bias: torch.Tensor  # (hidden,)


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer.  ``W_qkv`` rows are [W_query; W_key; W_value] (nn.Linear layout)."""

    W_qkv: torch.Tensor  # (3*hidden, hidden)
    b_qkv: torch.Tensor  # (3*hidden,)
    W_out: torch.Tensor  # (hidden, hidden) attention output projection
    b_out: torch.Tensor
    attn_norm_weight: torch.Tensor
    attn_norm_bias: torch.Tensor
    W_up: torch.Tensor  # (intermediate, hidden)
    b_up: torch.Tensor
    W_down: torch.Tensor  # (hidden, intermediate)
    b_down: torch.Tensor
    out_norm_weight: torch.Tensor
    out_norm_bias: torch.Tensor


def _normalize_key(key: str) -> str:
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix) :]
            break
    # Old TF-converted checkpoints name LayerNorm parameters gamma/beta.
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )


# One checked tensor by name and expected shape (``SpecError`` when absent or misshapen).
_Take = Callable[[str, tuple[int, ...]], torch.Tensor]


def load_weights(
    path: Path, config: EncoderConfig
) -> tuple[EmbeddingWeights, tuple[LayerWeights, ...]]:
    """Embedding tables and per-layer weights from the checkpoint directory ``path``."""
    tensors = {_normalize_key(k): v for k, v in load_checkpoint_tensors(path).items()}

    def take(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        tensor = tensors.get(name)
        if tensor is None:
            raise SpecError(f"{path.name}: the weights lack the tensor {name!r}", field="model")
        if tuple(tensor.shape) != shape:
            raise SpecError(
                f"{path.name}: tensor {name!r} has shape {tuple(tensor.shape)}, "
                f"config.json implies {shape}",
                field="model",
            )
        return tensor

    embeddings = _embedding_weights(take, config)
    layers = tuple(_layer_weights(take, config, i) for i in range(config.num_hidden_layers))
    return embeddings, layers


def _embedding_weights(take: _Take, config: EncoderConfig) -> EmbeddingWeights:
    hidden = config.hidden_size
    return EmbeddingWeights(
        word=take("embeddings.word_embeddings.weight", (config.vocab_size, hidden)),
        position=take(
            "embeddings.position_embeddings.weight", (config.max_position_embeddings, hidden)
        ),
        token_type=take(
            "embeddings.token_type_embeddings.weight", (config.type_vocab_size, hidden)
        ),
        norm_weight=take("embeddings.LayerNorm.weight", (hidden,)),
        norm_bias=take("embeddings.LayerNorm.bias", (hidden,)),
    )


def _layer_weights(take: _Take, config: EncoderConfig, i: int) -> LayerWeights:
    """Layer ``i``'s weights, its query, key and value projections in one matrix."""
    hidden, inter = config.hidden_size, config.intermediate_size
    p = f"encoder.layer.{i}."
    W_query = take(p + "attention.self.query.weight", (hidden, hidden))
    W_key = take(p + "attention.self.key.weight", (hidden, hidden))
    W_value = take(p + "attention.self.value.weight", (hidden, hidden))
    b_query = take(p + "attention.self.query.bias", (hidden,))
    b_key = take(p + "attention.self.key.bias", (hidden,))
    b_value = take(p + "attention.self.value.bias", (hidden,))
    return LayerWeights(
        W_qkv=torch.cat([W_query, W_key, W_value], dim=0),  # (3*hidden, hidden)
        b_qkv=torch.cat([b_query, b_key, b_value], dim=0),  # (3*hidden,)
        W_out=take(p + "attention.output.dense.weight", (hidden, hidden)),
        b_out=take(p + "attention.output.dense.bias", (hidden,)),
        attn_norm_weight=take(p + "attention.output.LayerNorm.weight", (hidden,)),
        attn_norm_bias=take(p + "attention.output.LayerNorm.bias", (hidden,)),
        W_up=take(p + "intermediate.dense.weight", (inter, hidden)),
        b_up=take(p + "intermediate.dense.bias", (inter,)),
        W_down=take(p + "output.dense.weight", (hidden, inter)),
        b_down=take(p + "output.dense.bias", (hidden,)),
        out_norm_weight=take(p + "output.LayerNorm.weight", (hidden,)),
        out_norm_bias=take(p + "output.LayerNorm.bias", (hidden,)),
    )
