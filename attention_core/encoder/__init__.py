"""Moved: the encoder is now the ``bert`` family of ``attention_core.models``.

This alias keeps ``from attention_core.encoder import …`` working for code
written before the move; new code imports from ``attention_core.models``.
"""

from ..models.bert import (
    Encoder,
    EncoderConfig,
    EncoderOutput,
    Tokenized,
    WordComparison,
    WordPieceTokenizer,
    default_model_dir,
    find_word,
    layer_cosines,
    resolve_model_dir,
)
from ..models.features import (
    ROLLOUT_RESIDUAL,
    attention_rollout,
    head_average,
    hidden_tokens,
    hide_special,
    kept_tokens,
)
from ..models.transport import (
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
    "hidden_tokens",
    "hide_special",
    "kept_tokens",
    "layer_cosines",
    "resolve_model_dir",
]
