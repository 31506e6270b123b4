"""Real models, each family written once in plain PyTorch over ``attention_with_steps``.

A model is a checkpoint directory in Hugging Face's layout (``config.json``,
safetensors weights, ``tokenizer.json``); weights are memory-mapped.
"""

from .gpt2 import GPT2, GPT2Config
from .kv_cache import KVCache
from .outputs import DecoderOutput, LayerTrace
from .protocols import CausalLM, DecoderConfig
from .safetensors_io import (
    checkpoint_files,
    load_checkpoint_tensors,
    load_safetensors,
    read_header,
    save_safetensors,
)

__all__ = [
    "GPT2",
    "CausalLM",
    "DecoderConfig",
    "DecoderOutput",
    "GPT2Config",
    "KVCache",
    "LayerTrace",
    "checkpoint_files",
    "load_checkpoint_tensors",
    "load_safetensors",
    "read_header",
    "save_safetensors",
]
