"""What a ``TextModel`` over a ``CausalLM``-shaped model does for one text, written once.

``Decoder`` (any decoder family, hand-written or transformers) and
``hf.text_models.TransformersEncoder`` differ in generation and in how they
refuse a sentence pair; their maps and their one-layer trace are the same pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, Unpack, cast

import torch
from torch import nn

from ...errors import MODEL_CONTEXT, MODEL_MAX_TOKENS, SpecError
from ..base.capabilities import Capabilities, OneStack, StackName, Target
from ..base.contract import (
    NO_OPTIONS,
    KeptStack,
    ModelPass,
    PassKey,
    PassOptions,
    cached_pass,
)
from ..base.decoder_lm import DecoderLM
from ..base.device import CPU, running_on, to_cpu
from ..base.out_projections import head_slices, output_projections
from ..base.outputs import LayerTrace, check_layer
from ..base.protocols import CausalLM, DecoderConfig, ModelSummary, model_info
from ..base.result_cache import DEFAULT_CACHE_BYTES, DEFAULT_LONG_CACHE_BYTES, ResultCache
from ..base.writing import Sampling, Written, refuse_writing
from ..checkpoints.files import TOKENIZER_FILE
from ..checkpoints.weight_dtype import hold, read_in, run_on
from ..maps.blocked_pass import BlockedPass, FullMapsPass
from ..maps.long_maps import KeptLayer, LongPass
from ..maps.text_maps import TokenizedMaps
from .text_tokenizer import TextTokenizer, TokenizedText

# From this many tokens a decoder's full maps are computed in blocks of rows (``FullMapsPass``,
# ~0.5x the attention's time at T = 1,024): past 512, the most any input had before long
# inputs, so every earlier answer stays bit for bit (blocks round differently, ~1e-7).
FULL_MAPS_BLOCKED_TOKENS = 513

ModelT = TypeVar("ModelT", bound=CausalLM)


@dataclass(frozen=True)
class DecoderMaps(TokenizedMaps):
    """One text through a decoder: per layer (H, T, T) weights, L + 1 (T, C) states."""

    tokenized: TokenizedText
    layer_attentions: tuple[torch.Tensor, ...]
    layer_hidden_states: tuple[torch.Tensor, ...]

    @property
    def token_type_ids(self) -> tuple[int, ...]:
        return (0,) * len(self.tokenized)


def tokenizer_file(directory: Path) -> Path:
    """``directory``'s ``tokenizer.json``; a ``SpecError`` naming the model when it is missing."""
    path = directory / TOKENIZER_FILE
    if not path.is_file():
        raise SpecError(f"{directory.name}: no {TOKENIZER_FILE}", field="model")
    return path


def kept_where_pooled(pass_: LongPass) -> tuple[KeptLayer, ...]:
    """A pass's kept q/k: on the CPU, unless the GPU kernel gathered its view
    (``LongPass.device_pooling``): then they stay on the GPU (32 layers of an 8B model
    at 32,768 tokens are 21 GB of float32, seconds to copy), where a zoom reads them;
    such a pass serves only requests that ask for device pooling (``PassOptions``)."""
    kept = pass_.kept()
    return kept if pass_.pooled_on_device else to_cpu(kept)


def checkpoint_tokenizer(path: Path, context: int, max_tokens: int | None) -> TextTokenizer:
    """The tokenizer at ``path`` with a token limit: the model's ``context``, or the
    server's ``max_tokens`` when that is lower (it never raises the limit)."""
    if max_tokens is None or max_tokens >= context:
        return TextTokenizer(path, context, "the model's context", MODEL_CONTEXT)
    return TextTokenizer(
        path, max_tokens, "the server's token limit per model input", MODEL_MAX_TOKENS
    )


def within_vocabulary(tokenized: TokenizedText, vocabulary: int, name: str) -> TokenizedText:
    """``tokenized``, unless the tokenizer gave an id the model (``name``) has no row for."""
    biggest = max(tokenized.input_ids)
    if biggest >= vocabulary:
        raise SpecError(
            f"{name}: tokenizer.json gives token id {biggest}, beyond the model's "
            f"vocabulary of {vocabulary}: the files do not belong together",
            field="model",
        )
    return tokenized


def refuse_pair(text_b: str | None, why: str, kind: str | None = None) -> None:
    """A ``SpecError`` on ``text_b`` when it is given: ``why`` this model reads no
    sentence pair, and what to do instead."""
    if text_b is not None:
        raise SpecError(f"text_b (a sentence pair) is {why}", field="text_b", kind=kind)


class TextModelBase(OneStack, Generic[ModelT]):
    """A model, its tokenizer and recent results: ``info``, ``encode``, ``trace``.

    Thread safety: the model is in eval mode with frozen weights and no call
    keeps state in it, so several threads may use one instance at once.
    """

    causal: bool

    def __init__(
        self,
        name: str,
        family: str,
        model: ModelT,
        tokenizer: TextTokenizer,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.name = name
        self.family = family
        self.model = model
        self.tokenizer = tokenizer
        self._cache: ResultCache[str, DecoderMaps] = ResultCache(cache_bytes)
        # Recent passes' kept q/k (``forward_stacks``); the app sets its own budget.
        self.long_cache: ResultCache[PassKey, ModelPass] = ResultCache(DEFAULT_LONG_CACHE_BYTES)
        self.device = CPU
        self._projections: list[nn.Module] | None = None

    def to_device(self, device: torch.device, dtype: torch.dtype | None = None) -> None:
        """Weights onto ``device``, held as ``dtype`` (None: as stored); passes then run
        there (16-bit weights: see ``weight_dtype.run_on``), results come back to the CPU.
        A model placed layer by layer at load (``placement``) stays where it is.  The
        weights left on the CPU are read in now, reporting ``load`` progress (``read_in``)."""
        module = self.torch_module
        if getattr(module, "hf_device_map", None) is not None:
            return
        hold(module, dtype)
        module.to(device)
        run_on(module, device)
        read_in(module)
        self.device = device

    @property
    def torch_module(self) -> nn.Module:
        """The ``nn.Module`` holding the weights (a ``TransformersLM`` wraps one)."""
        model: Any = self.model
        return model if isinstance(model, nn.Module) else cast(nn.Module, model.model)

    @property
    def config(self) -> DecoderConfig:
        return self.model.config

    @property
    def max_tokens(self) -> int:
        return self.tokenizer.max_tokens

    def info(self) -> ModelSummary:
        return model_info(self.name, self.family, self.causal, self.config, self.max_tokens)

    @property
    def capabilities(self) -> Capabilities:
        """One stack, ``decoder`` (which writes) or ``encoder``."""
        return Capabilities(("decoder",) if self.causal else ("encoder",), writes=self.causal)

    def write(self, prompt: str, max_new_tokens: int, **sampling: Unpack[Sampling]) -> Written:
        """An encoder writes nothing (``Decoder`` writes)."""
        raise refuse_writing(self.name, self.family, self.capabilities)

    # --- text in ------------------------------------------------------------------------

    def tokenize(self, text: str, field: str = "text") -> TokenizedText:
        tokenized = self.tokenizer.encode(text, field=field)
        return within_vocabulary(tokenized, self.config.vocabulary_size, self.name)

    def _refuse_pair(self, text_b: str | None) -> None:
        """A ``SpecError`` on ``text_b`` when it is given: these models read one text."""
        raise NotImplementedError

    # --- the forward pass ---------------------------------------------------------------

    def encode(self, text: str, text_b: str | None = None) -> DecoderMaps:
        """Every layer's attention and hidden states for ``text`` (or a recent result)."""
        self._refuse_pair(text_b)
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        tokenized = self.tokenize(text)
        # A decoder's maps in blocks of rows: the masked half of each map is never computed.
        blocked = self.causal and len(tokenized) >= FULL_MAPS_BLOCKED_TOKENS
        with torch.inference_mode(), running_on(self.device):
            out = self.model(
                torch.tensor([tokenized.input_ids]),
                num_logits=0,
                output_attentions=True,
                output_hidden_states=True,
                blocked=FullMapsPass() if blocked else None,
            )
            maps = DecoderMaps(
                tokenized,
                to_cpu(tuple(a[0] for a in out.attentions)),  # (H, T, T) each
                to_cpu(tuple(h[0] for h in out.hidden_states)),  # (T, C) each
            )
        self._cache.put(text, maps)
        return maps

    def forward_stacks(
        self,
        text: str,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        options: PassOptions = NO_OPTIONS,
    ) -> ModelPass:
        """The contract's pass (``contract.ModelPass``): one stack, ``decoder`` or
        ``encoder``, whose every layer's q/k (and what ``options`` asks) is kept and
        whose maps are never held whole (or a recent pass that has what is asked)."""
        self._refuse_pair(text_b)
        self.capabilities.check_fields(self.name, target)
        return cached_pass(self.long_cache, (text, None, None), options, self._pass(text))

    def _pass(self, text: str) -> Callable[[PassOptions], ModelPass]:
        return lambda options: self.pass_of(self.tokenize(text), options)

    def pass_of(self, tokenized: TokenizedText, options: PassOptions = NO_OPTIONS) -> ModelPass:
        """The contract's pass over tokens already made (a generation's prompt and the ids
        it wrote, read as they are: the maps' rows are the generation's), not remembered."""
        layers = self.config.num_layers
        # The core decoders' blocks report each layer themselves (``stack.run_blocks``).
        name: StackName = "decoder" if self.causal else "encoder"
        pass_ = options.long_pass(
            layers,
            not isinstance(self.model, DecoderLM),
            tokenized,
            head_outputs=lambda layer: self.head_outputs(name, layer),
        )
        with torch.inference_mode(), running_on(self.device):
            out = self.model(
                torch.tensor([tokenized.input_ids]),
                num_logits=0,
                output_hidden_states=options.hidden_states,
                blocked=pass_,
                maps_only=not options.hidden_states,  # the last MLP, final norm, head: skipped
            )
        stack = KeptStack(
            name,
            tokenized,
            tokenized,
            kept_where_pooled(pass_),
            (0,) * len(tokenized),
            pass_.query,
            tuple(pass_.grids[i].to_cpu() for i in sorted(pass_.grids)),
            to_cpu(tuple(pass_.averages[i] for i in sorted(pass_.averages))),
            to_cpu(tuple(h[0] for h in out.hidden_states)),
        )
        return ModelPass((stack,))

    def head_outputs(self, stack: str, layer: int) -> torch.Tensor:
        """Each head's slice of layer ``layer``'s output projection, (H, D, C) (one stack)."""
        c = self.config
        if self._projections is None:
            self._projections = output_projections(self.torch_module, c.num_layers)
        return head_slices(self._projections[layer], c.num_heads, c.head_dim)

    def trace(
        self,
        text: str,
        layer: int,
        text_b: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> tuple[TokenizedText, LayerTrace]:
        """Every tensor of layer ``layer`` (0-based) for ``text``; see ``LayerTrace``.
        ``blocked``: every attention call goes to this pass (``ForwardOptions``)."""
        self._refuse_pair(text_b)
        check_layer(layer, self.config.num_layers)
        tokenized = self.tokenize(text)
        with torch.inference_mode(), running_on(self.device):
            out = self.model(
                torch.tensor([tokenized.input_ids]),
                num_logits=0,
                trace_layer=layer,
                blocked=blocked,
            )
        if out.trace is None:
            raise RuntimeError(f"{self.family} returned no trace for layer {layer}")
        return tokenized, to_cpu(out.trace)
