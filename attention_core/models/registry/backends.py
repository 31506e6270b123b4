"""Which backend runs a checkpoint: the hand-written families (``core``) or ``transformers``.

The hand-written families keep their model types; every other type
transformers knows goes to the transformers backend (``hf``), as does a
checkpoint a hand-written family refuses (a Mistral whose sliding window is
shorter than its context).  This module decides and describes without
importing transformers' models: only its small name tables, and only when
installed.  Checkpoints that need their own code (``auto_map``) are refused:
attention-viz never runs a checkpoint's code.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, cast

from ...errors import SpecError

CORE = "core"
TRANSFORMERS = "transformers"
KINDS = ("encoder", "decoder", "encoder-decoder")
TRANSFORMERS_INSTALL = "pip install 'attention-viz[transformers]'"

# Encoder-decoder model types (cross-attention between two stacks).
ENCODER_DECODER_TYPES = frozenset(
    {
        "t5",
        "mt5",
        "umt5",
        "bart",
        "mbart",
        "marian",
        "pegasus",
        "pegasus_x",
        "blenderbot",
        "blenderbot-small",
        "led",
        "prophetnet",
        "m2m_100",
        "nllb-moe",
        "fsmt",
        "whisper",
        "encoder-decoder",
        "longt5",
        "switch_transformers",
    }
)


# Model types whose attention reads keys that are not the text's tokens, and why: their maps
# have more columns than the text has tokens, which the app's token-by-token maps cannot show.
KEYS_NOT_TOKENS = {
    "deepseek_v4": "its compressed-attention layers also attend to compressed entries (one "
    "for every 4 tokens, or every 128) beside the text's tokens, so their maps have more "
    "columns than the text has tokens; the app's maps are token by token",
}


def transformers_installed() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _offline() -> None:
    """Before transformers is first imported: it must never call the hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def is_encoder_decoder(raw: Mapping[str, Any]) -> bool:
    return raw.get("model_type") in ENCODER_DECODER_TYPES or bool(raw.get("is_encoder_decoder"))


def transformers_kind(raw: Mapping[str, Any], shown: str) -> str:
    """``encoder``, ``decoder`` or ``encoder-decoder`` from transformers' model tables.

    A ``SpecError`` saying why when transformers does not know the type or has
    no language-model class for it (vision, audio...).
    """
    _offline()
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    )

    model_type = raw.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise SpecError(
            f"{shown} is not known to transformers {transformers.__version__} (nor to the "
            "hand-written families); a newer transformers may know it",
            field="model",
        )
    # A vision-language model (LLaVA, Qwen2-VL) runs its text backbone on text alone.
    causal_lm = (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        or model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    )
    if is_encoder_decoder(raw) or (
        model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES and not causal_lm
    ):
        check_one_text_model(raw, shown)
        return "encoder-decoder"
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not raw.get("is_decoder"):
        return "encoder"
    if causal_lm:
        return "decoder"
    raise SpecError(
        f"{shown} is known to transformers but has no text language-model class (causal "
        "or masked); the app shows text models",
        field="model",
    )


def check_one_text_model(raw: Mapping[str, Any], shown: str) -> None:
    """``SpecError`` in words for an encoder-decoder the app cannot show: one whose encoder
    reads sound, or transformers' generic pair of two separate models."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

    speech = raw.get("model_type") in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES
    for key in ("audio_config", "encoder_config"):  # Voxtral, Qwen2-Audio; Granite Speech
        if isinstance(raw.get(key), Mapping) and (key == "audio_config" or speech):
            raise SpecError(
                f"{shown} reads sound (its config's {key} is an audio encoder's): its "
                "encoder's input is audio, and the app shows text models",
                field="model",
            )
    if raw.get("model_type") == "encoder-decoder":
        parts = [
            str(part.get("model_type")) if isinstance(part, Mapping) else "unknown"
            for part in (raw.get("encoder"), raw.get("decoder"))
        ]
        raise SpecError(
            f"{shown} is transformers' generic EncoderDecoderModel: two separate models "
            f"joined (a {parts[0]} encoder and a {parts[1]} decoder, each with a config of "
            "its own); the app opens encoder-decoders built as one model (T5, BART, "
            "Marian...), not such a pair",
            field="model",
        )


def keys_not_tokens(raw: Mapping[str, Any], shown: str) -> SpecError | None:
    """The refusal of a model type whose attention reads keys other than the tokens."""
    why = KEYS_NOT_TOKENS.get(str(raw.get("model_type")))
    return None if why is None else SpecError(f"{shown}: {why}", field="model")


def check_no_custom_code(raw: Mapping[str, Any], shown: str) -> None:
    if raw.get("auto_map"):
        names = ", ".join(sorted(map(str, raw["auto_map"])))
        raise SpecError(
            f"{shown} needs its own Python code (config.json's auto_map: {names}); "
            "attention-viz never runs a checkpoint's code (trust_remote_code)",
            field="model",
        )


def transformers_sizes(raw: Mapping[str, Any]) -> Any:
    """The listing's sizes from ``config.json`` read by transformers' config class."""
    from ..hf.language_model import TransformersSizes, transformers_config

    try:
        return TransformersSizes.of(transformers_config(raw))
    except SpecError:
        raise
    except Exception as exc:  # an untrusted config.json: any failure is the file's fault
        raise SpecError(
            f"transformers cannot read this config.json: {type(exc).__name__}: {exc}",
            field="model",
        ) from exc


def check_capture(raw: Mapping[str, Any], kind: str) -> None:
    """``SpecError`` when a tiny model of this family shows its attention cannot be
    captured (``hf.probe``: one dry run per family)."""
    from ..hf.probe import check

    check(raw, kind)


def load_with_transformers(
    directory: Path,
    name: str,
    max_tokens: int,
    cache_bytes: int,
    *,
    kind: str,
    family: str,
    placement: Any = None,
) -> Any:
    from ..hf.capture import Kind
    from ..hf.text_models import load_transformers

    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    return load_transformers(
        directory,
        name,
        max_tokens,
        cache_bytes,
        kind=cast(Kind, kind),
        family=family,
        placement=placement,
    )


def _refuse(error: SpecError, *_args: Any, **_kwargs: Any) -> Any:
    raise error


def refusal(error: SpecError) -> Any:
    """A ``sizes`` or ``load`` function that raises ``error`` (the entry lists it as the reason)."""
    return partial(_refuse, error)


def capture_path(backend: str | None, family: str | None) -> str | None:
    """How a model's attention reaches the core: ``core`` (a hand-written family),
    ``interface`` (transformers' attention interface) or ``adapter`` (the family computes
    attention in its own code, run through the core by ``hf.adapters``); None if unknown."""
    if backend == CORE:
        return "core"
    if backend != TRANSFORMERS or family is None:
        return None
    from ..hf.adapters import ADAPTED_TYPES

    return "adapter" if family in ADAPTED_TYPES else "interface"


def transformers_loader(kind: str, family: str, placement: Any = None) -> Any:
    """``placement``: a ``placement.Placement`` (accelerate spreads the model), or None."""
    return partial(load_with_transformers, kind=kind, family=family, placement=placement)


def sliding_windows(model: object, num_layers: int) -> list[int | None]:
    """Per layer, a loaded model's sliding window (None: the layer reads every earlier key).

    Only transformers-backed models have windows (``TransformersLM.sliding_windows``,
    reached through a ``Decoder``'s or ``TransformersEncoder``'s ``model``).
    """
    windows = getattr(getattr(model, "model", None), "sliding_windows", None)
    if not isinstance(windows, tuple) or len(windows) != num_layers:
        return [None] * num_layers
    return list(windows)
