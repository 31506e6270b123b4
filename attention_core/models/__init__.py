"""Real models, each family written once in plain PyTorch over ``attention_with_steps``.

A model is a checkpoint directory in Hugging Face's layout (``config.json``,
safetensors weights, ``tokenizer.json``); weights are memory-mapped.  Families:
``bert`` (encoders), ``gpt2`` and ``llama`` (Llama, Mistral, Qwen2: ``llama.py``);
every other architecture through the transformers backend (``hf``, the
``transformers`` extra; ``backends`` decides which runs a checkpoint).
``registry.ModelRegistry`` lists every checkpoint the app can see and loads a
few at a time; ``generation`` and ``head_trace`` are written once for all
decoders.
"""

from .base.kv_cache import KVCache
from .base.outputs import DecoderOutput, LayerTrace
from .base.protocols import CausalLM, DecoderConfig, TextModel
from .checkpoints.model_size import Sizes
from .checkpoints.safetensors_io import (
    checkpoint_files,
    load_checkpoint_tensors,
    load_safetensors,
    read_header,
    save_safetensors,
)
from .families.bert import Encoder, EncoderConfig, EncoderOutput, default_model_dir
from .families.gpt2 import GPT2, GPT2Config
from .families.llama import MODEL_TYPES as LLAMA_MODEL_TYPES
from .families.llama import Llama, LlamaConfig
from .maps.features import (
    ROLLOUT_RESIDUAL,
    attention_rollout,
    head_average,
    hidden_tokens,
    hide_special,
    kept_tokens,
)
from .maps.text_maps import MapFeatures, ModelMaps
from .maps.transport import (
    COMPACT_DTYPES,
    DECODE_DESCRIPTION,
    UINT8_MAX_ABS_ERROR,
    CompactTensor,
    decode_compact,
    encode_compact,
)
from .registry.family_table import FAMILIES, Family, family_of
from .registry.model_registry import ModelEntry, ModelNotFound, ModelRegistry, ModelUnsupported
from .text.decoder import Decoder, GeneratedText
from .text.generation import (
    AttentionRecorder,
    Generation,
    decode_one_token,
    generate,
    prefill,
    sample,
)
from .text.head_trace import HeadTrace, head_trace
from .text.text_model_base import DecoderMaps
from .text.text_tokenizer import TextTokenizer, TokenizedText

__all__ = [
    "COMPACT_DTYPES",
    "DECODE_DESCRIPTION",
    "FAMILIES",
    "GPT2",
    "ROLLOUT_RESIDUAL",
    "UINT8_MAX_ABS_ERROR",
    "AttentionRecorder",
    "CausalLM",
    "CompactTensor",
    "Decoder",
    "DecoderConfig",
    "DecoderMaps",
    "DecoderOutput",
    "Encoder",
    "EncoderConfig",
    "EncoderOutput",
    "Family",
    "GPT2Config",
    "GeneratedText",
    "Generation",
    "HeadTrace",
    "KVCache",
    "LLAMA_MODEL_TYPES",
    "LayerTrace",
    "Llama",
    "LlamaConfig",
    "MapFeatures",
    "ModelEntry",
    "ModelMaps",
    "ModelNotFound",
    "ModelRegistry",
    "ModelUnsupported",
    "Sizes",
    "TextModel",
    "TextTokenizer",
    "TokenizedText",
    "attention_rollout",
    "checkpoint_files",
    "decode_compact",
    "decode_one_token",
    "default_model_dir",
    "encode_compact",
    "family_of",
    "generate",
    "head_average",
    "head_trace",
    "hidden_tokens",
    "hide_special",
    "kept_tokens",
    "load_checkpoint_tensors",
    "load_safetensors",
    "prefill",
    "read_header",
    "sample",
    "save_safetensors",
]
