"""A transformers model behind this package's ``CausalLM`` protocol, every attention captured.

``TransformersLM.load`` reads a checkpoint directory offline
(``local_files_only``, safetensors only, never ``trust_remote_code``) in
float32 with our attention (``capture.ATTENTION_NAME``); calling it returns
a ``DecoderOutput`` like the hand-written families', so ``Decoder``
(generation with a KV cache, maps, traces) works on it unchanged.  The rest
of each block (norms, RoPE, MLPs) stays transformers' code.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack, cast

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    DynamicCache,
    PretrainedConfig,
)

from ...errors import SpecError
from ...progress import muted
from ..base.device import CPU
from ..base.kv_cache import KVCache
from ..base.outputs import DecoderOutput, LayerTrace
from ..base.placement import Placement
from ..base.protocols import ForwardOptions, Wanted
from ..base.stack import first_position
from ..checkpoints.hooked_float32 import compute_hooked_in_float32
from ..checkpoints.safetensors_io import checkpoint_files, read_header
from ..checkpoints.weight_dtype import run_on, stored_dtype
from ..maps.blocked_pass import BlockedPass
from . import load_progress
from .adapters import ADAPTED_TYPES, adapted_modules, install_adapters
from .capture import (
    ADDITIVE_NAME,
    ATTENTION_NAME,
    AttentionRun,
    CapturedCall,
    Kind,
    Site,
    Stack,
    attention_sites,
    capturing,
    handing,
    keyword_modules,
    register,
)
from .described_mask import describing
from .failures import FailureWatch, guarded
from .load_errors import files_at_fault
from .unrotated import Unrotated, grabbing_unrotated, uses_rope

# Families whose position ids start after the padding id (RoBERTa's layout): the
# position table holds pad_token_id + 1 more rows than the tokens it can place.
PADDED_POSITION_TYPES = frozenset(
    {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text", "xmod", "ibert"}
)
# Without any context size in config.json (ALiBi models): only the server's token limit applies.
UNBOUNDED_CONTEXT = 1 << 20


@dataclass(frozen=True)
class TransformersSizes:
    """A transformers config's sizes under this package's names (``DecoderConfig``)."""

    num_layers: int
    num_heads: int
    num_kv_heads: int
    hidden_size: int
    head_dim: int
    max_positions: int
    vocabulary_size: int

    @classmethod
    def of(cls, config: PretrainedConfig) -> TransformersSizes:
        text: Any = config.get_text_config()
        if getattr(text, "num_attention_heads", None) is None:
            raise SpecError(
                f"model_type {config.model_type!r} has no attention heads "
                "(num_attention_heads): the app shows attention",
                field="model",
            )
        heads = int(text.num_attention_heads)
        hidden = int(text.hidden_size)
        kv_heads = getattr(text, "num_key_value_heads", None) or heads
        head_dim = getattr(text, "head_dim", None) or hidden // heads
        return cls(
            num_layers=int(text.num_hidden_layers),
            num_heads=heads,
            num_kv_heads=int(kv_heads),
            hidden_size=hidden,
            head_dim=int(head_dim),
            max_positions=context_of(text),
            vocabulary_size=int(text.vocab_size),
        )


def context_of(config: Any) -> int:
    """The positions a model can place: ``max_position_embeddings`` (or ``n_positions``...)."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            if getattr(config, "model_type", None) in PADDED_POSITION_TYPES:
                value -= int(getattr(config, "pad_token_id", None) or 0) + 1
            return value
    return UNBOUNDED_CONTEXT


def layer_windows(config: Any, num_layers: int) -> tuple[int | None, ...]:
    """Per layer, the sliding window (keys a query reads: itself and the w - 1 before it),
    None for full attention: ``layer_types`` where the config has them, else every layer."""
    text = config.get_text_config()
    kinds = getattr(text, "attention_layers", None)  # GPT-Neo: "global" or "local" per layer
    if getattr(text, "model_type", None) == "gpt_neo" and isinstance(kinds, list):
        local = int(text.window_size)
        return tuple(local if kind == "local" else None for kind in kinds)
    window = getattr(text, "sliding_window", None)
    if (
        not isinstance(window, int)
        or window <= 0
        or getattr(text, "use_sliding_window", True) is False
    ):
        return (None,) * num_layers
    types = getattr(text, "layer_types", None)
    if types:
        return tuple(window if kind == "sliding_attention" else None for kind in types)
    return (window,) * num_layers


class TransformersKVCache(KVCache):
    """transformers' own ``DynamicCache`` behind ``KVCache``'s ``length``/``advance``.

    Built without the model's config, so every layer keeps every position
    (a sliding-window layer's mask hides the old ones): each step's weights
    then span all the keys so far, as ``AttentionRecorder`` stitches them.
    """

    def __init__(self, max_length: int) -> None:  # no preallocated buffers
        self.hf = DynamicCache()
        self.max_length = max_length
        self.length = 0


# Families that concatenate an additive term of their own onto the mask (DeepSeek-V4: its
# compressed entries' block bias): loaded with additive float masks (``capture``).
ADDITIVE_MASK_TYPES = frozenset({"deepseek_v4"})


def attention_implementation(model_type: str) -> str:
    """Ours (with additive masks where the family adds to them), or ``eager`` for a
    family an adapter computes (``adapters``)."""
    if model_type in ADAPTED_TYPES:
        return "eager"
    return ADDITIVE_NAME if model_type in ADDITIVE_MASK_TYPES else ATTENTION_NAME


def transformers_config(raw: Mapping[str, Any]) -> PretrainedConfig:
    """``config.json`` (parsed) as transformers reads it from the file: its special floats
    (``{"__float__": "Infinity"}``, Mamba's ``time_step_limit``) decoded."""
    from transformers import CONFIG_MAPPING

    decoded = PretrainedConfig._decode_special_floats(dict(raw))
    config: PretrainedConfig = CONFIG_MAPPING[raw["model_type"]].from_dict(decoded)
    return config


def auto_class(model_type: str, kind: str) -> Any:
    """transformers' auto class for a decoder's language model (a vision-language model's
    with its vision tower, run on text alone), a seq2seq model, or an encoder's base model."""
    from transformers import AutoModelForImageTextToText, AutoModelForSeq2SeqLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if kind == "encoder-decoder":
        return AutoModelForSeq2SeqLM
    if kind != "decoder":
        return AutoModel
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    return AutoModelForImageTextToText


def load_model(directory: Path, kind: Kind, placement: Placement | None = None) -> nn.Module:
    """A checkpoint as transformers loads it: offline, in its stored dtype (run in float32
    on the CPU, see ``weight_dtype``), our attention (through the interface or an
    adapter), eval mode.  ``placement``: layers spread over devices and disk by accelerate
    (``placement.Placement``)."""
    register()
    headers = [read_header(path) for path in checkpoint_files(directory)]
    dtype = stored_dtype(headers) if placement is None else placement.dtype
    spread = {} if placement is None else placement.from_pretrained_arguments()
    with files_at_fault(directory):
        config = AutoConfig.from_pretrained(
            directory, local_files_only=True, trust_remote_code=False
        )
        auto = auto_class(str(config.model_type), kind)
        # Spread: read now, reported layer by layer (``load_progress``); in memory: read
        # after, by ``read_in``, which reports it (one bar, not two).
        load_progress.install()
        with nullcontext() if placement is not None else muted():
            model: nn.Module = auto.from_pretrained(
                directory,
                attn_implementation=attention_implementation(str(config.model_type)),
                dtype=dtype,
                local_files_only=True,
                trust_remote_code=False,
                use_safetensors=True,
                **spread,
            )
    install_adapters(model)
    model.eval().requires_grad_(False)
    if placement is None:
        run_on(model, CPU)
    else:  # the layers accelerate runs on the CPU (all of them on a CPU-only map)
        compute_hooked_in_float32(model)
    return model


class TransformersLM:
    """A loaded transformers model, called like the hand-written families (``CausalLM``).

    ``kind``: ``decoder`` (causal LM: logits, a KV cache) or ``encoder`` (the
    base model: no logits).  On load a two-token forward pass finds each
    layer's attention module; an architecture whose attention does not go
    through transformers' attention interface (or an adapter) is refused there.
    A module shared by every layer (ALBERT) is counted per call (``per_call``).
    """

    def __init__(self, model: nn.Module, kind: Kind, name: str = "") -> None:
        self.model = model
        self.kind = kind
        self.stack: Stack = "decoder" if kind == "decoder" else "encoder"
        self.config = TransformersSizes.of(cast(PretrainedConfig, model.config))
        self.sites = attention_sites(model, kind)
        # The attention modules the forward's keyword does not reach (``_find_attention``).
        self.handed: tuple[nn.Module, ...] = adapted_modules(model)
        self.sliding_windows = layer_windows(model.config, self.config.num_layers)
        self._modules = dict(model.named_modules())
        parameters = inspect.signature(model.forward).parameters
        self._logits_to_keep = "logits_to_keep" in parameters
        # Bloom and MPT renamed past_key_values (still accepted, with a warning).
        self._cache_argument = "cache" if "cache" in parameters else "past_key_values"
        self.rope = uses_rope(model.config)
        self.name = name or type(model).__name__
        self.failures = FailureWatch()
        self.per_call = False
        self.attention_paths = self._find_attention(self.name)

    @classmethod
    def load(
        cls, directory: Path, kind: Kind, placement: Placement | None = None
    ) -> TransformersLM:
        return cls(load_model(directory, kind, placement), kind, directory.name)

    def to(self, device: torch.device) -> TransformersLM:
        """Weights onto ``device`` (``Decoder.to_device`` calls this as on an ``nn.Module``)."""
        self.model.to(device)
        return self

    def _find_attention(self, name: str) -> dict[int, str]:
        """Layer -> the path of its attention module, from one short forward pass.

        When the forward's keyword does not reach every layer's attention call (a family
        whose layers call their attention without passing their keywords on: StableLM,
        Nemotron), the modules that may call it (``capture.keyword_modules``) are handed
        each pass's run by pre-hooks instead (``self.handed``: those that called it)."""
        calls = self._first_calls(self.handed)
        if len(calls) < self.config.num_layers and not self.handed:
            calls = self._first_calls(keyword_modules(self.model))
            self.handed = tuple(
                self._modules[p] for p in dict.fromkeys(c.site.module for c in calls)
            )
        paths = {call.site.layer: call.site.module for call in calls}
        if len(paths) < len(calls) == self.config.num_layers:  # one module, called per layer
            self.per_call = True
            paths = {layer: call.site.module for layer, call in enumerate(calls)}
        if sorted(paths) != list(range(self.config.num_layers)):
            raise SpecError(
                f"{name}: {type(self.model).__name__} computes attention in "
                f"{len(paths)} of its {self.config.num_layers} layers through transformers' "
                "attention interface; the app needs every layer's",
                field="model",
            )
        return paths

    def _first_calls(self, handed: Sequence[nn.Module]) -> list[CapturedCall]:
        """The attention calls of this model's stack in a short forward pass handed a run
        (``handed``: the modules given it by pre-hooks, see ``capture.handing``)."""
        with (
            torch.inference_mode(),
            capturing(self.sites, keep=lambda site: False) as capture,
            handing(AttentionRun(capture), handed) as keywords,
        ):
            self.model(input_ids=torch.zeros(1, 2, dtype=torch.long), use_cache=False, **keywords)
        return [call for call in capture.calls if call.site.stack == self.stack]

    def new_cache(self, batch: int = 1, max_length: int | None = None) -> KVCache:
        return TransformersKVCache(max_length or self.config.max_positions)

    def save_pretrained(self, directory: Path) -> None:
        self.model.save_pretrained(directory)  # type: ignore[operator]

    def __call__(self, input_ids: torch.Tensor, **options: Unpack[ForwardOptions]) -> DecoderOutput:
        """Shapes: input_ids (B, T) -> ``DecoderOutput``; see ``protocols.CausalLM``.

        The attentions are the captured (B, H, T, S) weights of each layer;
        with ``trace_layer`` that layer's q, k, v, every step and its input x.
        """
        cache = options.get("cache")
        # maps_only: no logits (Wanted.of); transformers' last layer still runs whole.
        wanted = Wanted.of(options)
        trace_layer = wanted.trace_layer
        length = input_ids.shape[1]
        first_position(cache, length, self.config.max_positions)
        arguments = self._arguments(input_ids, cache, wanted)
        if wanted.output_attentions or trace_layer is not None:
            out, calls, unrotated = self._captured(arguments, wanted, cache)
        else:
            out, calls, unrotated = self._uncaptured(arguments, wanted.blocked), [], Unrotated()
        if cache is not None:
            cache.advance(length)
        hidden = tuple(out.hidden_states) if out.hidden_states is not None else ()
        return DecoderOutput(
            logits=self._logits(out, input_ids, wanted.num_logits),
            attentions=tuple(c.weights for c in calls) if wanted.output_attentions else (),
            hidden_states=hidden if wanted.output_hidden_states else (),
            trace=None if trace_layer is None else _trace(trace_layer, calls, hidden, unrotated),
        )

    def _arguments(
        self, input_ids: torch.Tensor, cache: KVCache | None, wanted: Wanted
    ) -> dict[str, Any]:
        """The model's keyword arguments for ``input_ids``: hidden states when wanted or
        traced; a decoder's cache (transformers' own, inside ours) and its logits kept."""
        arguments: dict[str, Any] = {
            "input_ids": input_ids,
            "output_hidden_states": wanted.output_hidden_states or wanted.trace_layer is not None,
        }
        if self.kind == "decoder":
            hf_cache = cache.hf if isinstance(cache, TransformersKVCache) else None
            arguments.update({self._cache_argument: hf_cache, "use_cache": hf_cache is not None})
            if self._logits_to_keep and wanted.num_logits is not None:
                arguments["logits_to_keep"] = max(wanted.num_logits, 1)  # 0 would mean all
        return arguments

    def _captured(
        self, arguments: dict[str, Any], wanted: Wanted, cache: KVCache | None
    ) -> tuple[Any, list[CapturedCall], Unrotated]:
        """The pass with every layer's attention captured (``wanted.trace_layer``'s call
        kept whole, its input hooked, RoPE's unrotated q and k grabbed on a first pass);
        its output, the stack's calls and what was grabbed."""
        trace_layer = wanted.trace_layer
        hooks = {}
        if trace_layer is not None:
            path = self.attention_paths[trace_layer]
            hooks[path] = self._modules[path]

        def keep(site: Site) -> bool:
            return site.layer == trace_layer and site.stack == self.stack

        unrotated = Unrotated()
        progress = {self.stack: (0, self.config.num_layers)}
        with (
            capturing(self.sites, keep, hooks, progress, self.per_call) as capture,
            handing(AttentionRun(capture, wanted.blocked), self.handed) as keywords,
        ):
            arguments.update(keywords)
            if trace_layer is not None and self.rope and not (cache and cache.length):
                module = self._modules[self.attention_paths[trace_layer]]
                with grabbing_unrotated(module) as unrotated:
                    out = self._forward(arguments)
            else:
                out = self._forward(arguments)
        calls = capture.stack(self.stack)
        if len(calls) != self.config.num_layers:
            raise self.failures.fail(
                self.name, f"{len(calls)} of its {self.config.num_layers} layers captured"
            )
        return out, calls, unrotated

    def _uncaptured(self, arguments: dict[str, Any], blocked: BlockedPass | None) -> Any:
        """The pass keeping no map: each layer's context block by block when ``blocked``."""
        if blocked is None:
            return self._forward(arguments)
        with (
            handing(AttentionRun(blocked=blocked), self.handed) as keywords,
            describing(self.kind == "decoder"),  # no (T, T) causal mask: ``described_mask``
        ):
            arguments.update(keywords)
            return self._forward(arguments)

    def _forward(self, arguments: dict[str, Any]) -> Any:
        """The model's forward pass; a failure of its code is a ``CaptureFailed``."""
        return guarded(self.failures, self.name, lambda: self.model(**arguments))

    def _logits(self, out: Any, input_ids: torch.Tensor, num_logits: int | None) -> torch.Tensor:
        logits: torch.Tensor | None = getattr(out, "logits", None)
        if logits is None:  # an encoder's base model: no language-model head
            return torch.empty(input_ids.shape[0], 0, 0)
        if num_logits is None:
            return logits
        return logits[:, logits.shape[1] - num_logits :]  # (B, num_logits, V)


def _trace(
    layer: int, calls: list[CapturedCall], hidden: tuple[torch.Tensor, ...], unrotated: Unrotated
) -> LayerTrace:
    """``layer``'s trace from its captured call: its input x (else the hidden state
    before it), q, k, v, every step, and RoPE's unrotated q and k when grabbed."""
    call = next(c for c in calls if c.site.layer == layer)
    x = call.x if call.x is not None else hidden[layer]
    d = call.query.shape[-1]
    return LayerTrace(
        layer,
        x,
        call.query,
        call.key,
        call.value,
        call.steps,
        q_unrotated=unrotated.heads("q", d),
        k_unrotated=unrotated.heads("k", d),
        qk_norm=unrotated.normed,
    )
