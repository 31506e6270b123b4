"""The model families this package implements, and which one a ``config.json`` belongs to.

A family is its ``model_type`` values, whether it is causal, how to read its
sizes from ``config.json`` (refusing what the forward pass does not
implement) and how to load a checkpoint.  Adding a family is one entry in
``FAMILIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import SpecError
from ..base.protocols import TextModel
from ..checkpoints.model_size import Sizes
from ..families.bert import Encoder, EncoderConfig
from ..families.gpt2 import GPT2, GPT2Config
from ..families.llama import MODEL_TYPES as LLAMA_MODEL_TYPES
from ..families.llama import Llama, LlamaConfig
from ..text.decoder import decoder_loader
from . import backends
from .backends import is_encoder_decoder

# (directory, name, max_tokens, cache_bytes) -> a loaded model
Loader = Callable[[Path, str, int, int], TextModel]


@dataclass(frozen=True)
class Family:
    """``backend``: ``core`` (written here) or ``transformers``; ``kind``: ``encoder``,
    ``decoder`` or ``encoder-decoder`` (from ``causal`` when not given).  ``probe``: run
    when the model is listed, after every cheap check; raises ``SpecError`` when the
    family's attention cannot be captured (``hf.probe``'s dry run)."""

    name: str
    model_types: tuple[str, ...]
    causal: bool
    sizes: Callable[[Mapping[str, Any]], Sizes]  # raises SpecError for what is not implemented
    load: Loader
    backend: str = backends.CORE
    kind: str = ""
    probe: Callable[[Mapping[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", "decoder" if self.causal else "encoder")


def _bert_sizes(raw: Mapping[str, Any]) -> Sizes:
    return Sizes.of(EncoderConfig.from_dict(dict(raw), name=""))


def _load_bert(directory: Path, name: str, max_tokens: int, cache_bytes: int) -> TextModel:
    return Encoder.from_dir(directory, max_tokens=max_tokens, cache_bytes=cache_bytes, name=name)


def _gpt2_sizes(raw: Mapping[str, Any]) -> Sizes:
    return Sizes.of(GPT2Config.from_dict(raw))


def _llama_sizes(raw: Mapping[str, Any]) -> Sizes:
    return Sizes.of(LlamaConfig.from_dict(raw))


FAMILIES: tuple[Family, ...] = (
    Family("bert", ("bert",), False, _bert_sizes, _load_bert),
    Family("gpt2", ("gpt2",), True, _gpt2_sizes, decoder_loader("gpt2", GPT2.from_pretrained)),
    Family(
        "llama",
        LLAMA_MODEL_TYPES,
        True,
        _llama_sizes,
        decoder_loader("llama", Llama.from_pretrained),
    ),
)

SUPPORTED_TYPES = tuple(t for f in FAMILIES for t in f.model_types)


def family_of(raw: Mapping[str, Any]) -> Family:
    """The family of a parsed ``config.json``; a ``SpecError`` saying why if none fits.

    A hand-written family keeps its model types unless it refuses the
    checkpoint (a Mistral with a sliding window): that one, and every other
    type transformers knows, gets the transformers backend.
    """
    model_type = raw.get("model_type")
    architectures = raw.get("architectures") or []
    shown = f"model_type {model_type!r}" + (
        f" ({', '.join(map(str, architectures))})" if architectures else ""
    )
    if not isinstance(model_type, str):
        raise SpecError("config.json has no model_type", field="model")
    if not is_encoder_decoder(raw):
        for family in FAMILIES:
            if model_type in family.model_types:
                try:
                    family.sizes(raw)
                except SpecError as exc:
                    if not _only_the_window(family, raw):
                        raise
                    if not backends.transformers_installed():
                        raise SpecError(
                            f"{exc.message}; the transformers backend would run it: "
                            f"{backends.TRANSFORMERS_INSTALL}",
                            field="model",
                        ) from exc
                    return transformers_family(raw, shown)
                return family
    return transformers_family(raw, shown)


def _only_the_window(family: Family, raw: Mapping[str, Any]) -> bool:
    """Whether ``family`` refuses ``raw`` for its sliding window alone."""
    try:
        family.sizes({**raw, "sliding_window": None, "use_sliding_window": False})
    except SpecError:
        return False
    return True


def transformers_family(raw: Mapping[str, Any], shown: str) -> Family:
    """The transformers backend's family for this ``config.json`` (its model type).

    Refusals still give a family when the kind is known (an encoder-decoder,
    transformers not installed): its ``sizes`` raises the reason, so the
    listing shows the backend and kind beside it.
    """
    model_type = str(raw["model_type"])
    backends.check_no_custom_code(raw, shown)
    if not backends.transformers_installed():
        kind = "encoder-decoder" if is_encoder_decoder(raw) else ""
        error = SpecError(
            f"{shown} needs the transformers backend, which is not installed: "
            f"{backends.TRANSFORMERS_INSTALL}",
            field="model",
        )
        if not kind:
            raise error
        return _refused(model_type, kind, error)
    kind = backends.transformers_kind(raw, shown)
    refused = backends.keys_not_tokens(raw, shown)
    if refused is not None:
        return _refused(model_type, kind, refused)
    return Family(
        model_type,
        (model_type,),
        kind == "decoder",
        _transformers_sizes,
        backends.transformers_loader(kind, model_type),
        backend=backends.TRANSFORMERS,
        kind=kind,
        probe=partial(backends.check_capture, kind=kind),
    )


def _refused(model_type: str, kind: str, error: SpecError) -> Family:
    refuse = backends.refusal(error)
    return Family(
        model_type, (model_type,), False, refuse, refuse, backend=backends.TRANSFORMERS, kind=kind
    )


def _transformers_sizes(raw: Mapping[str, Any]) -> Sizes:
    return Sizes.of(backends.transformers_sizes(raw))
