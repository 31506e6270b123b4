"""What every decoder family provides, so generation, traces and the registry are written once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, TypedDict, Unpack, cast, overload

import torch

from ..checkpoints.model_size import DecoderConfig as DecoderConfig
from ..maps.blocked_pass import BlockedPass
from ..maps.text_maps import ModelMaps, TokenizedLike
from .capabilities import Target
from .contract import ModelPass, PassKey, StackedModel
from .kv_cache import KVCache
from .outputs import DecoderOutput, LayerTrace
from .result_cache import ResultCache
from .writing import Sampling, Written


@dataclass(frozen=True)
class ModelSummary:
    """What ``GET /api/model`` says about a loaded model (``TextModel.info``): its sizes
    (``layers``: the first stack's; ``decoder_layers``: an encoder-decoder's decoder's).
    The answer's schema (``app.schemas.model.ModelInfo``) is built from these fields; a
    ``description`` in a field's metadata is its description there."""

    name: str
    family: str
    causal: bool
    layers: int
    heads: int
    kv_heads: int
    hidden: int
    head_dim: int
    vocab_size: int
    max_positions: int
    max_tokens: int = field(metadata={"description": "tokens per input, special tokens included"})
    decoder_layers: int | None = field(
        default=None,
        metadata={
            "description": "encoder-decoders only: the decoder's layers (layers: the encoder's)"
        },
    )

    @property
    def deepest(self) -> int:
        """The layers of its deepest stack."""
        return max(self.layers, self.decoder_layers or 0)


def model_info(
    name: str, family: str, causal: bool, config: DecoderConfig, max_tokens: int
) -> ModelSummary:
    """``TextModel.info()`` for any family read through a ``DecoderConfig``."""
    return ModelSummary(
        name,
        family,
        causal,
        layers=config.num_layers,
        heads=config.num_heads,
        kv_heads=config.num_kv_heads,
        hidden=config.hidden_size,
        head_dim=config.head_dim,
        vocab_size=config.vocabulary_size,
        max_positions=config.max_positions,
        max_tokens=max_tokens,
    )


class Alias:
    """A ``DecoderConfig`` common name read from the field a checkpoint's config calls it
    by: ``num_layers = Alias("n_layer")``, written in the config class's own body (mypy
    2.4 does not see one inherited from another module as satisfying the protocol)."""

    def __init__(self, field: str) -> None:
        self.field = field

    @overload
    def __get__(self, config: None, owner: type) -> Alias: ...
    @overload
    def __get__(self, config: object, owner: type | None = None) -> int: ...
    def __get__(self, config: object, owner: type | None = None) -> int | Alias:
        return self if config is None else cast(int, getattr(config, self.field))


class TransformersNames:
    """``DecoderConfig``'s common names, for a config dataclass whose fields carry
    transformers' own names (``num_hidden_layers``, ``num_attention_heads``, ``vocab_size``,
    ``max_position_embeddings``).  As in transformers, one key/value head per query head
    unless a family says otherwise."""

    num_hidden_layers: int
    num_attention_heads: int
    vocab_size: int
    max_position_embeddings: int

    @property
    def num_layers(self) -> int:
        return self.num_hidden_layers

    @property
    def num_heads(self) -> int:
        return self.num_attention_heads

    @property
    def num_kv_heads(self) -> int:
        return self.num_attention_heads

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings

    @property
    def vocabulary_size(self) -> int:
        return self.vocab_size


class ForwardOptions(TypedDict, total=False):
    """What a ``CausalLM``'s forward pass may be asked besides its ``input_ids`` (B, T).

    ``cache`` (default None): the new positions follow the cached ones and the cache
    advances by T; ``num_logits`` (default None): None for every position, k for the
    last k, 0 for none; ``output_attentions``, ``output_hidden_states`` (default
    False); ``trace_layer`` (0-based, default None): that layer's full ``LayerTrace``;
    ``blocked`` (default None): every attention call goes to this pass
    (``blocked_pass.BlockedPass``: a long input's, no map's, every full map's).
    ``maps_only`` (default False): only the attention is wanted (a maps-only pass): the
    last layer stops after its attention (no MLP), no final norm, no logits (0 rows),
    no hidden states (a ``ValueError`` if asked for).
    """

    cache: KVCache | None
    num_logits: int | None
    output_attentions: bool
    output_hidden_states: bool
    trace_layer: int | None
    blocked: BlockedPass | None
    maps_only: bool


class Wanted(NamedTuple):
    """What a forward pass returns besides the cache's advance, and the pass its attention
    calls go to, defaults filled in."""

    num_logits: int | None
    output_attentions: bool
    output_hidden_states: bool
    trace_layer: int | None
    blocked: BlockedPass | None = None
    maps_only: bool = False

    @classmethod
    def of(cls, options: ForwardOptions) -> Wanted:
        maps_only = options.get("maps_only", False)
        hidden = options.get("output_hidden_states", False)
        if maps_only and hidden:
            raise ValueError("a maps-only forward pass has no hidden states to return")
        return cls(
            0 if maps_only else options.get("num_logits"),
            options.get("output_attentions", False),
            hidden,
            options.get("trace_layer"),
            options.get("blocked"),
            maps_only,
        )


class CausalLM(Protocol):
    """A decoder-only language model (GPT-2, Llama family) as this package writes them.

    ``model(input_ids (B, T), **options) -> DecoderOutput`` (see ``ForwardOptions``).
    """

    @property
    def config(self) -> DecoderConfig: ...

    def __call__(
        self, input_ids: torch.Tensor, **options: Unpack[ForwardOptions]
    ) -> DecoderOutput: ...

    def new_cache(self, batch: int = 1, max_length: int | None = None) -> KVCache: ...

    def save_pretrained(self, directory: Path) -> None: ...


class TextModel(StackedModel, Protocol):
    """A loaded checkpoint of any family, as the app uses it (``bert.Encoder``, ``Decoder``):
    the contract (``StackedModel.forward_stacks``) and what the pages use besides.

    ``encode`` gives every layer's maps for a text (``text_b``: an encoder's
    sentence pair); ``trace`` one layer's every tensor (0-based layer).
    """

    @property
    def causal(self) -> bool: ...
    @property
    def max_tokens(self) -> int: ...

    def info(self) -> ModelSummary: ...

    def to_device(self, device: torch.device, dtype: torch.dtype | None = None) -> None: ...

    def tokenize(self, text: str, *, field: str = "text") -> TokenizedLike: ...

    def encode(self, text: str, text_b: str | None = None) -> ModelMaps: ...

    def write(self, prompt: str, max_new_tokens: int, **sampling: Unpack[Sampling]) -> Written:
        """Continue ``prompt`` (a decoder) or write a target for it (an encoder-decoder),
        keeping no map; a model whose ``capabilities.writes`` is false refuses."""
        ...

    def target_tokens(self, target: Target) -> int:
        """How many tokens the decoder reads for ``target`` (a ``SpecError`` on ``target``
        from a model that reads none)."""
        ...

    def trace(
        self, text: str, layer: int, text_b: str | None = None
    ) -> tuple[TokenizedLike, LayerTrace]: ...

    long_cache: ResultCache[PassKey, ModelPass]
