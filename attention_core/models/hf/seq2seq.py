"""Encoder-decoders (T5, BART, Marian...) through transformers, every attention by the core.

Three stacks of maps: the encoder's self-attention over the source (S, S), the
decoder's causal self-attention over the target (T, T) and the cross-attention
(T, S): target rows, source columns, what each target position read of the
source.  The decoder reads the target as transformers feeds ``labels``: the
target's tokens (the tokenizer's ``text_target``, its end token included)
shifted right behind the decoder start token, so row i is the position that
predicts target token i.

Generation is greedy (or sampled) one token at a time through transformers'
encoder-decoder KV cache, with the checkpoint's ``generation_config.json``
rules (``seq2seq_rules``); the maps cover the whole target, the last written
token included (it is fed once more, its logits unused).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Unpack, cast

import torch

from ...errors import SpecError
from ...progress import report
from ..base.capabilities import STACK_NAMES, Capabilities, StackName, StackTrace, Target
from ..base.contract import NO_OPTIONS, KeptStack, ModelPass, PassKey, PassOptions, cached_pass
from ..base.device import CPU
from ..base.out_projections import head_slices
from ..base.outputs import LayerTrace, check_layer
from ..base.protocols import ModelSummary
from ..base.result_cache import DEFAULT_CACHE_BYTES, DEFAULT_LONG_CACHE_BYTES, ResultCache
from ..base.writing import Written
from ..checkpoints.safetensors_io import checkpoint_files, read_header
from ..checkpoints.weight_dtype import hold, read_in, run_on, stored_dtype
from ..maps.blocked_pass import BlockedPass
from ..maps.context_pass import context_only
from ..maps.long_maps import StackedPass
from ..maps.text_maps import TokenizedLike, TokenizedMaps
from ..text.generation import Sampling, StopReason, sample, sampler_seed, sampling_values
from ..text.text_chars import check_token_count
from ..text.text_model_base import refuse_pair, tokenizer_file, within_vocabulary
from ..text.text_tokenizer import TextTokenizer, TokenizedText
from .adapters import adapted_modules, install_adapters
from .capture import (
    ATTENTION_NAME,
    AttentionRun,
    Capture,
    Site,
    Stack,
    attention_sites,
    capturing,
    handing,
    register,
)
from .failures import FailureWatch, guarded
from .load_errors import files_at_fault
from .relative_bias import install_relative_bias
from .seq2seq_rules import Rule, apply_rules, generation_rules
from .seq2seq_stacks import stacks_forward


@dataclass(frozen=True)
class TargetText:
    """What the decoder reads: the start token, then the target's tokens but the last.

    ``labels`` are the target's own ids (what each position should predict).
    """

    input_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    labels: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass(frozen=True)
class Seq2SeqMaps(TokenizedMaps):
    """One source (``tokenized``) and target through an encoder-decoder.

    ``layer_attentions`` (H, S, S) and ``layer_hidden_states`` (S, C) are the
    encoder's (so ``tokens``, head averages and rollout are the source's);
    ``decoder_attentions`` (H, T, T) and ``cross_attentions`` (H, T, S) per
    decoder layer.
    """

    tokenized: TokenizedText
    target: TargetText
    layer_attentions: tuple[torch.Tensor, ...]
    layer_hidden_states: tuple[torch.Tensor, ...]
    decoder_attentions: tuple[torch.Tensor, ...]
    cross_attentions: tuple[torch.Tensor, ...]

    @property
    def source(self) -> TokenizedText:
        return self.tokenized

    @property
    def token_type_ids(self) -> tuple[int, ...]:
        return (0,) * len(self.source)

    @property
    def encoder_attentions(self) -> tuple[torch.Tensor, ...]:
        return self.layer_attentions

    @property
    def nbytes(self) -> int:
        """Bytes held, the decoder's and cross maps included (for the result cache)."""
        extra = [*self.decoder_attentions, *self.cross_attentions]
        return super().nbytes + sum(t.numel() * t.element_size() for t in extra)


@dataclass(frozen=True)
class GeneratedTarget(Seq2SeqMaps):
    """A source, the target the model wrote for it, and the three stacks over all of it.

    ``target`` is the start token and every written token (the last included).
    """

    new_ids: tuple[int, ...] = ()
    new_tokens: tuple[str, ...] = ()  # the text each written token adds
    text: str = ""
    stop_reason: StopReason = "max_new_tokens"
    seed: int | None = None  # None: greedy


@dataclass(eq=False, repr=False)
class EncoderDecoder:
    """A transformers encoder-decoder checkpoint whose every attention is the core's.

    ``encode_pair`` gives the three stacks' maps; ``trace_stack`` one layer's
    every tensor in one stack; ``generate`` writes a target.  The model is in
    eval mode and each call makes its own cache and capture, so threads may
    share it.  The most recent maps (up to ``cache_bytes`` of tensors) are kept.
    """

    causal = False  # the encoder's maps (``attentions``) are bidirectional
    capabilities = Capabilities(STACK_NAMES, writes=True)  # it writes a target

    name: str
    model: Any
    tokenizer: TextTokenizer
    cache_bytes: InitVar[int] = DEFAULT_CACHE_BYTES

    def __post_init__(self, cache_bytes: int) -> None:
        config = self.model.config
        self.family = str(config.model_type)
        self.sites: dict[int, Site] = attention_sites(self.model, "encoder-decoder")
        self.adapted = adapted_modules(self.model)
        modules = dict(self.model.named_modules())
        # (stack, layer) -> (module path, module), for hooking one layer's input
        self.layer_modules: dict[tuple[Stack, int], tuple[str, torch.nn.Module]] = {}
        for path, module in modules.items():
            site = self.sites.get(id(module))
            if site is not None and path.endswith(_ATTENTION_SUFFIXES):  # the innermost
                self.layer_modules[(site.stack, site.layer)] = (path, module)  # (LED's)
        generation = self.model.generation_config
        start = generation.decoder_start_token_id
        if start is None:
            start = getattr(config, "decoder_start_token_id", None)
        if start is None:
            raise SpecError(
                f"{self.name}: the config has no decoder_start_token_id: the decoder cannot start",
                field="model",
            )
        self.start_id = int(start)
        eos = (
            generation.eos_token_id
            if generation.eos_token_id is not None
            else getattr(config, "eos_token_id", None)
        )
        self.eos_ids = frozenset(
            int(i) for i in (eos if isinstance(eos, list) else [eos]) if i is not None
        )
        self._cache: ResultCache[tuple[str, str | None], Seq2SeqMaps] = ResultCache(cache_bytes)
        self.long_cache: ResultCache[PassKey, ModelPass] = ResultCache(DEFAULT_LONG_CACHE_BYTES)
        self.failures = FailureWatch()
        # Newer families renamed past_key_values (still accepted, with a warning).
        parameters = inspect.signature(self.model.forward).parameters
        self._cache_argument = "cache" if "cache" in parameters else "past_key_values"
        check_stacks(self.model, self.name, self.start_id)

    @classmethod
    def from_dir(
        cls,
        directory: Path,
        name: str | None = None,
        max_tokens: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> EncoderDecoder:
        """Load with transformers, offline, every attention registered as the core's.

        The weights are held as stored (16-bit ones computed in float32 layer by layer,
        ``weight_dtype``), as a decoder's.  ``max_tokens`` bounds the
        tokens of a source and of a target (and the model's positions, if it has
        a fixed number, bound them too).
        """
        from transformers import AutoModelForSeq2SeqLM

        tokenizer_path = tokenizer_file(directory)
        register()
        # Offline, safetensors only (no pickle), never the checkpoint's own code.
        with files_at_fault(directory):
            headers = [read_header(path) for path in checkpoint_files(directory)]
            model = AutoModelForSeq2SeqLM.from_pretrained(
                directory,
                attn_implementation=ATTENTION_NAME,
                local_files_only=True,
                trust_remote_code=False,
                use_safetensors=True,
                dtype=stored_dtype(headers),
            ).eval()
        install_adapters(model)
        install_relative_bias(model)  # T5's position bias made block by block
        run_on(model, CPU)
        context = getattr(model.config, "max_position_embeddings", None)
        limit, source = max_tokens or 512, "the server's token limit per model input"
        if isinstance(context, int) and context <= limit:
            limit, source = context, "the model's context"
        tokenizer = TextTokenizer(tokenizer_path, limit, source)
        return cls(name or directory.name, model, tokenizer, cache_bytes)

    # --- what it is -----------------------------------------------------------------------

    @property
    def max_tokens(self) -> int:
        return self.tokenizer.max_tokens

    def to_device(self, device: torch.device, dtype: torch.dtype | None = None) -> None:
        """Encoder-decoders run on the CPU only, for now: refused, with the reason,
        elsewhere.  Held as ``dtype`` (None: as stored), the weights left on the CPU read in
        now, reporting ``load`` progress (``weight_dtype.read_in``)."""
        if device.type != "cpu":
            raise SpecError(
                f"{self.name}: encoder-decoders run on the CPU only (ATTENTION_VIZ_DEVICE is "
                f"{device.type!r}); set ATTENTION_VIZ_DEVICE=cpu to open this model",
                field="model",
            )
        hold(self.model, dtype)
        run_on(self.model, device)
        read_in(self.model)

    @property
    def num_layers(self) -> int:
        return sum(1 for stack, _ in self.layer_modules if stack == "encoder")

    @property
    def num_decoder_layers(self) -> int:
        return sum(1 for stack, _ in self.layer_modules if stack == "decoder")

    def layers_of(self, stack: Stack) -> int:
        return sum(1 for s, _ in self.layer_modules if s == stack)

    def info(self) -> ModelSummary:
        c = self.model.config
        heads = int(c.num_attention_heads)
        return ModelSummary(
            self.name,
            self.family,
            self.causal,
            layers=self.num_layers,
            heads=heads,
            kv_heads=heads,
            hidden=int(c.hidden_size),
            head_dim=int(getattr(c, "d_kv", None) or c.hidden_size // heads),
            vocab_size=int(c.vocab_size),
            max_positions=int(getattr(c, "max_position_embeddings", None) or self.max_tokens),
            max_tokens=self.max_tokens,
            decoder_layers=self.num_decoder_layers,
        )

    # --- text in --------------------------------------------------------------------------

    def tokenize(self, text: str, field: str = "text") -> TokenizedText:
        tokenized = self.tokenizer.encode(text, field=field)
        return within_vocabulary(tokenized, int(self.model.config.vocab_size), self.name)

    def start_token(self) -> tuple[str, bool]:
        """The start token's spelling; it is always flagged special (a marker, not text)."""
        return self.tokenizer.pieces([self.start_id])[0], True

    def target_text(self, target: str | None) -> TargetText:
        """The decoder's input for ``target``: shifted right behind the start token."""
        start, start_special = self.start_token()
        if target is None:
            return TargetText((self.start_id,), (start,), (start_special,))
        labels = self.tokenize(target, field="target")
        return TargetText(
            (self.start_id, *labels.input_ids[:-1]),
            (start, *labels.tokens[:-1]),
            (start_special, *labels.special[:-1]),
            labels.input_ids,
        )

    def target_from_ids(self, ids: tuple[int, ...], field: str = "target_ids") -> TargetText:
        """The decoder's input for a target given as ids (as a generation answered them):
        the start token, then every id, the last included, as the generation's maps read
        it; the tokens are the text each id adds, as there."""
        vocabulary = int(self.model.config.vocab_size)
        bad = next((i for i in ids if not 0 <= i < vocabulary), None)
        if bad is not None:
            raise SpecError(
                f"{field} holds token id {bad}; {self.name}'s ids are 0..{vocabulary - 1}",
                field=field,
            )
        limit = self.max_tokens - 1  # the start token is a position too
        source = f"{self.tokenizer.limit_source}, less the start token"
        check_token_count(len(ids), field, limit, source, self.tokenizer.limit_setting)
        start, start_special = self.start_token()
        special_ids = self.tokenizer.special_ids
        return TargetText(
            (self.start_id, *ids),
            (start, *self.tokenizer.continuation([], ids)),
            (start_special, *(i in special_ids for i in ids)),
        )

    def decoder_input(self, target: str | tuple[int, ...] | None) -> TargetText:
        """``target`` as text (``target_text``) or as ids (``target_from_ids``)."""
        if isinstance(target, tuple):
            return self.target_from_ids(target)
        return self.target_text(target)

    def target_tokens(self, target: Target) -> int:
        return len(self.decoder_input(target))

    def refuse_pair(self, text_b: str | None) -> None:
        refuse_pair(
            text_b,
            f"for encoders; {self.name} is an encoder-decoder: "
            "put the source in text and the decoder's text in target",
        )

    # --- the forward pass -----------------------------------------------------------------

    def encode(self, text: str, text_b: str | None = None) -> Seq2SeqMaps:
        """The three stacks for ``text`` with the decoder at its start token alone."""
        self.refuse_pair(text_b)
        return self.encode_pair(text, None)

    def encode_pair(self, text: str, target: str | None) -> Seq2SeqMaps:
        """Every layer's maps of the three stacks for ``text`` and ``target`` (or recent ones)."""
        cached = self._cache.get((text, target))
        if cached is not None:
            return cached
        source = self.tokenize(text)
        decoder_input = self.target_text(target)
        with (
            torch.inference_mode(),
            self._capture(lambda site: False, progress=self.forward_progress) as capture,
        ):
            out = self.stacks_with(
                AttentionRun(capture),
                torch.tensor([source.input_ids]),
                torch.tensor([decoder_input.input_ids]),
                hidden_states=True,
            )
            self._check_captured(capture)
        maps = Seq2SeqMaps(
            source,
            decoder_input,
            _first(capture.weights("encoder")),  # (H, S, S) each
            tuple(h[0] for h in out.encoder_hidden_states),  # (S, C) each
            _first(capture.weights("decoder")),  # (H, T, T) each
            _first(capture.weights("cross")),  # (H, T, S) each
        )
        self._cache.put((text, target), maps)
        return maps

    def head_outputs(self, stack: str, layer: int) -> torch.Tensor:
        """Each head's slice of the output projection of ``stack``'s layer ``layer``,
        (H, D, C) (BART/Marian's ``out_proj``, T5's ``o``)."""
        _, module = self.layer_modules[(cast(Stack, stack), layer)]
        projection = next(
            getattr(module, n) for n in ("out_proj", "o", "dense") if hasattr(module, n)
        )
        info = self.info()
        return head_slices(projection, info.heads, info.head_dim)

    def forward_stacks(
        self,
        text: str,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        options: PassOptions = NO_OPTIONS,
    ) -> ModelPass:
        """The contract's pass (``contract.ModelPass``): the ``encoder`` stack (source ×
        source), the ``decoder``'s (target × target) and ``cross`` (target × source),
        every layer's q/k kept, no map held whole; ``options.view`` is the encoder's
        (the other stacks' views are rebuilt from what they kept)."""
        self.refuse_pair(text_b)
        run = partial(self._pass, text, target)
        return cached_pass(self.long_cache, (text, None, target), options, run)

    def _pass(self, text: str, target: Target | None, options: PassOptions) -> ModelPass:
        source = self.tokenize(text)
        decoder_input = self.decoder_input(target)
        no_averages = replace(options, averages_up_to=0)  # no rollout crosses stacks
        passes = {
            "encoder": options.long_pass(
                self.num_layers, False, source, True, False, partial(self.head_outputs, "encoder")
            ),
            "decoder": options.long_pass(self.num_decoder_layers, False, decoder_input, False),
            "cross": no_averages.long_pass(self.layers_of("cross"), False, decoder_input, False),
        }

        def site(module: object) -> tuple[str, int]:
            found = self.sites[id(module)]
            return found.stack, found.layer

        with torch.inference_mode():
            out = self.stacks_with(
                AttentionRun(blocked=StackedPass(passes, site)),
                torch.tensor([source.input_ids]),
                torch.tensor([decoder_input.input_ids]),
                hidden_states=options.hidden_states,
            )

        def stack(name: StackName, rows: TokenizedLike, hidden: Any) -> KeptStack:
            pass_ = passes[name]
            try:
                layers = pass_.kept()
            except RuntimeError as exc:  # a layer the capture did not see: said, not a 500
                raise self.failures.fail(self.name, f"{name} stack: {exc}") from exc
            return KeptStack(
                name,
                rows,
                source if name != "decoder" else decoder_input,
                layers,
                (0,) * len(rows.tokens),
                averages=tuple(pass_.averages[i] for i in sorted(pass_.averages)),
                hidden_states=tuple(h[0] for h in hidden) if options.hidden_states else (),
                query=pass_.query,
                grids=tuple(pass_.grids[i] for i in sorted(pass_.grids)),
                first_is_sink=False,
            )

        return ModelPass(
            (
                stack("encoder", source, out.encoder_hidden_states),
                stack("decoder", decoder_input, out.decoder_hidden_states),
                stack("cross", decoder_input, ()),
            )
        )

    def trace(
        self,
        text: str,
        layer: int,
        text_b: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> tuple[TokenizedText, LayerTrace]:
        """The encoder's layer ``layer`` (0-based) for ``text``; see ``trace_stack``."""
        self.refuse_pair(text_b)
        tokens, trace, _ = self.trace_stack(text, None, "encoder", layer, blocked)
        assert isinstance(tokens, TokenizedText)  # the encoder's rows are the source
        return tokens, trace

    def stack_trace(
        self,
        text: str,
        layer: int,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        stack: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> StackTrace:
        """``trace_stack`` as the contract asks it (``stack`` None: the encoder), with the
        source's tokens for ``cross``."""
        self.refuse_pair(text_b)
        chosen = self.capabilities.stack(stack)
        rows, trace, source = self.trace_stack(text, target, chosen, layer, blocked)
        if source is None:
            return StackTrace(chosen, rows, trace)
        return StackTrace(chosen, rows, trace, source[0], self.tokenize(text).tokens)

    def trace_stack(
        self,
        text: str,
        target: str | tuple[int, ...] | None,
        stack: Stack,
        layer: int,
        blocked: BlockedPass | None = None,
    ) -> tuple[TokenizedText | TargetText, LayerTrace, torch.Tensor | None]:
        """Every tensor of one attention layer (0-based) of ``stack``; ``target`` is the
        target's text or its ids (``decoder_input``); ``blocked``: the pass every attention
        call goes to (``ForwardOptions``).

        Returns the tokens of its rows (the source for the encoder, else the
        target), the ``LayerTrace`` (x: that attention's input, after its norm),
        and for ``cross`` the encoder's output (1, S, C) its keys and values
        come from (None otherwise).
        """
        check_layer(layer, self.layers_of(stack), f"the {stack} stack of this model")
        source = self.tokenize(text)
        decoder_input = self.decoder_input(target)
        path, module = self.layer_modules[(stack, layer)]

        def wanted(site: Site) -> bool:
            return site.stack == stack and site.layer == layer

        with (
            torch.inference_mode(),
            self._capture(wanted, {path: module}) as capture,
        ):
            out = self.stacks_with(
                AttentionRun(capture, blocked),
                torch.tensor([source.input_ids]),
                torch.tensor([decoder_input.input_ids]),
            )
        try:
            call = capture.call(stack, layer)
        except LookupError as exc:
            raise self.failures.fail(self.name, str(exc)) from exc
        if call.x is None:
            raise self.failures.fail(self.name, f"the input of {path} was not captured")
        trace = LayerTrace(layer, call.x, call.query, call.key, call.value, call.steps)
        rows = source if stack == "encoder" else decoder_input
        return rows, trace, out.encoder_last_hidden_state if stack == "cross" else None

    def forward_with(self, run: AttentionRun, **arguments: Any) -> Any:
        """The model's forward pass, its attention calls handed ``run`` (``capture.handing``);
        a failure of its code is a ``CaptureFailed``."""
        with handing(run, self.adapted) as keywords:
            return guarded(self.failures, self.name, lambda: self.model(**arguments, **keywords))

    def stacks_with(
        self,
        run: AttentionRun,
        source_ids: torch.Tensor,
        decoder_ids: torch.Tensor,
        hidden_states: bool = False,
    ) -> Any:
        """``forward_with`` without the LM head (``seq2seq_stacks``): the encoder over
        ``source_ids`` (B, S), the decoder over ``decoder_ids`` (B, T), no cache."""
        with handing(run, self.adapted) as keywords:
            forward = partial(stacks_forward, self.model, source_ids, decoder_ids)
            return guarded(self.failures, self.name, lambda: forward(hidden_states, keywords))

    def _check_captured(self, capture: Capture) -> None:
        """Every layer of every stack captured, else ``CaptureFailed`` (said, not a 500)."""
        for stack in ("encoder", "decoder", "cross"):
            found, expected = len(capture.stack(stack)), self.layers_of(stack)
            if found != expected:
                raise self.failures.fail(
                    self.name, f"{found} of its {expected} {stack} layers captured"
                )

    @property
    def forward_progress(self) -> dict[Stack, tuple[int, int]]:
        """A forward pass's progress: the encoder's layers, then the decoder's (whose
        cross-attention is part of its layer): total = encoder + decoder layers."""
        return {
            "encoder": (0, self.num_layers),
            "decoder": (self.num_layers, self.num_decoder_layers),
        }

    @contextmanager
    def _capture(
        self,
        keep: Callable[[Site], bool],
        hooks: dict[str, torch.nn.Module] | None = None,
        progress: dict[Stack, tuple[int, int]] | None = None,
    ) -> Iterator[Capture]:
        with capturing(self.sites, keep, hooks, progress) as capture:
            yield capture

    # --- generation -----------------------------------------------------------------------

    def write(self, prompt: str, max_new_tokens: int, **sampling: Unpack[Sampling]) -> Written:
        """The contract's generation: a target for the source ``prompt``, keeping no map;
        its pass is ``forward_stacks`` over the source and the written ids (the decoder
        reading the start token and every one, as the steps fed them)."""
        written = self.generate(prompt, max_new_tokens, capture_attentions=False, **sampling)

        def reread(options: PassOptions) -> ModelPass:
            return self.forward_stacks(prompt, target=written.new_ids, options=options)

        read = len(written.source)  # the source: nothing written there
        return Written.of(written, read, (False,) * read, reread)

    def generate(
        self,
        prompt: str,
        max_new_tokens: int,
        *,
        capture_attentions: bool = True,
        **sampling: Unpack[Sampling],
    ) -> GeneratedTarget:
        """Write a target for ``prompt`` (the source): greedy with ``temperature`` 0.

        Stops after an end-of-sequence token or ``max_new_tokens``.  Greedy
        decoding gives transformers' ``generate(do_sample=False)`` ids.  Without
        ``capture_attentions`` no map is kept (the three stacks' tuples are empty: the
        source's pass computes each layer's context block by block, each step reads the
        cache), at any length; ``forward_stacks`` over the source and ``new_ids`` gives
        the maps.
        """
        temperature, top_k, seed = sampling_values(sampling)
        self._check_new_tokens(max_new_tokens)
        source = self.tokenize(prompt, field="prompt")
        seed, generator = sampler_seed(temperature, seed)
        rules = generation_rules(self.model.generation_config, max_new_tokens)
        pick = partial(_next_token, rules, temperature, top_k, generator)
        size = (1 + max_new_tokens, len(source)) if capture_attentions else None
        with torch.inference_mode():
            encoded, encoder_weights = self._encode_source(source, capture_attentions)
            decoded = self._decode(encoded, max_new_tokens, pick, size)
        return self._generated(source, encoded, encoder_weights, decoded, seed)

    def _check_new_tokens(self, max_new_tokens: int) -> None:
        """``max_new_tokens`` at least 1, and the start token and it within the limit."""
        if max_new_tokens < 1:
            raise SpecError(
                f"max_new_tokens is {max_new_tokens}; it must be at least 1",
                field="max_new_tokens",
            )
        if 1 + max_new_tokens > self.max_tokens:
            raise SpecError(
                f"the start token and max_new_tokens ({max_new_tokens}) make "
                f"{1 + max_new_tokens} target positions; the limit is {self.max_tokens} "
                f"({self.tokenizer.limit_source})",
                field="max_new_tokens",
            )

    def _encode_source(
        self, source: TokenizedText, capture_attentions: bool
    ) -> tuple[Any, tuple[torch.Tensor, ...]]:
        """The encoder's pass over ``source`` (its hidden states kept) and its maps
        (H, S, S) per layer; without ``capture_attentions`` no map (each layer's
        context is computed block by block)."""
        # No map wanted: none held; blocked, not fused: the same logits with or without maps.
        blocked = context_only(capture_attentions, fused=False)
        with (
            self._capture(lambda site: False) as capture,
            handing(AttentionRun(capture, blocked), self.adapted) as keywords,
        ):
            encoded = guarded(
                self.failures,
                self.name,
                lambda: self.model.get_encoder()(
                    input_ids=torch.tensor([source.input_ids]),
                    output_hidden_states=True,
                    **keywords,
                ),
            )
        return encoded, _first(capture.weights("encoder")) if capture_attentions else ()

    def _decode(
        self,
        encoded: Any,
        max_new_tokens: int,
        pick: Callable[[list[int], torch.Tensor], int],
        size: tuple[int, int] | None,
    ) -> _Decoded:
        """The decoder one token at a time through the cache, from the start token, each
        next token ``pick``ed from the ids so far and the last position's logits (V,).
        ``size`` (N, S): each step's rows are kept in maps of that size; None: no map."""
        decoded = _Decoded([self.start_id])
        ids = decoded.ids
        cache = self._new_cache()
        done = False
        while True:
            out, capture = self._step(encoded, ids[-1], cache)
            if size is not None:
                maps = (decoded.decoder_maps, decoded.cross_maps)
                _record_step(capture, len(ids) - 1, size, *maps)
            if done:  # the last written token's own row is recorded
                return decoded
            token = pick(ids, out.logits[0, -1])
            ids.append(token)
            if token in self.eos_ids:
                decoded.stop = "eos"
            done = decoded.stop == "eos" or len(ids) - 1 == max_new_tokens
            report("generate", len(ids) - 1, max_new_tokens)

    def _new_cache(self) -> Any:
        """An empty encoder-decoder KV cache (self-attention's and cross-attention's)."""
        from transformers import DynamicCache, EncoderDecoderCache

        config = self.model.config
        return EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))

    def _step(self, encoded: Any, token: int, cache: Any) -> tuple[Any, Capture]:
        """One decoder step: ``token`` read after what ``cache`` holds; its output and capture."""
        with self._capture(lambda site: False) as capture:
            out = self.forward_with(
                AttentionRun(capture),
                encoder_outputs=encoded,
                decoder_input_ids=torch.tensor([[token]]),  # (1, 1)
                use_cache=True,
                **{self._cache_argument: cache},
            )
        return out, capture

    def _generated(
        self,
        source: TokenizedText,
        encoded: Any,
        encoder_weights: tuple[torch.Tensor, ...],
        decoded: _Decoded,
        seed: int | None,
    ) -> GeneratedTarget:
        """The written target, its maps cut to the rows written, and the source's."""
        ids = decoded.ids
        new_ids = tuple(ids[1:])
        rows = len(ids)
        start, start_special = self.start_token()
        special_ids = self.tokenizer.special_ids
        new_tokens = tuple(self.tokenizer.continuation([], new_ids))
        target = TargetText(
            tuple(ids),
            (start, *new_tokens),
            (start_special, *(i in special_ids for i in new_ids)),
        )
        return GeneratedTarget(
            source,
            target,
            encoder_weights,
            tuple(h[0] for h in encoded.hidden_states),
            tuple(m[:, :rows, :rows].contiguous() for m in decoded.decoder_maps),
            tuple(m[:, :rows].contiguous() for m in decoded.cross_maps),
            new_ids=new_ids,
            new_tokens=new_tokens,
            text=self.tokenizer.decode(new_ids),
            stop_reason=decoded.stop,
            seed=seed,
        )


@dataclass
class _Decoded:
    """A generation's ids so far (the start token first), why it stopped, and its maps:
    per decoder layer (H, N, N) and cross (H, N, S), N = 1 + max_new_tokens."""

    ids: list[int]
    stop: StopReason = "max_new_tokens"
    decoder_maps: list[torch.Tensor] = field(default_factory=list)
    cross_maps: list[torch.Tensor] = field(default_factory=list)


def _next_token(
    rules: list[Rule],
    temperature: float,
    top_k: int | None,
    generator: torch.Generator | None,
    ids: list[int],
    logits: torch.Tensor,
) -> int:
    """The next token from one position's logits (V,), the checkpoint's rules applied."""
    return sample(apply_rules(rules, ids, logits), temperature, top_k, generator)


# Attention modules' names (BART/Marian: self_attn, encoder_attn; T5: SelfAttention,
# EncDecAttention): the modules whose input is the attention's x.
# The attention modules' names (NLLB-MoE's cross-attention is ``cross_attention``).
_ATTENTION_SUFFIXES = (
    "self_attn",
    "encoder_attn",
    "SelfAttention",
    "EncDecAttention",
    "cross_attention",
    "cross_attn",
)


class ForwardFailed(SpecError):
    """The load's forward pass failed (not a stack left uncaptured)."""


def check_stacks(model: Any, name: str, start_id: int) -> None:
    """Refuse ``model`` unless a short forward pass captures every layer of its three stacks
    (encoder, decoder self-attention, cross-attention) through the core's attention."""
    sites = attention_sites(model, "encoder-decoder")
    config = model.config
    expected: dict[Stack, int] = {
        "encoder": int(getattr(config, "encoder_layers", None) or config.num_hidden_layers),
        "decoder": int(
            getattr(config, "decoder_layers", None)
            or getattr(config, "num_decoder_layers", None)
            or config.num_hidden_layers
        ),
    }
    expected["cross"] = expected["decoder"]
    with (
        torch.inference_mode(),
        capturing(sites, keep=lambda site: False) as capture,
        handing(AttentionRun(capture), adapted_modules(model)) as keywords,
    ):
        try:
            model(
                input_ids=torch.zeros(1, 2, dtype=torch.long),
                decoder_input_ids=torch.full((1, 1), start_id, dtype=torch.long),
                use_cache=False,
                **keywords,
            )
        except Exception as exc:  # noqa: BLE001 - the family's code failed: its reason
            raise ForwardFailed(
                f"{name}: a forward pass of {type(model).__name__} failed "
                f"({type(exc).__name__}: {str(exc)[:200]})",
                field="model",
            ) from exc
    for stack, layers in expected.items():
        found = len(capture.stack(stack))
        if found != layers:
            raise SpecError(
                f"{name}: {type(model).__name__} computes {stack} attention in {found} of its "
                f"{layers} layers through transformers' attention interface; the app needs "
                "every layer's",
                field="model",
            )


def _record_step(
    capture: Capture,
    position: int,
    size: tuple[int, int],
    decoder_maps: list[torch.Tensor],
    cross_maps: list[torch.Tensor],
) -> None:
    """One generation step's rows (the token at ``position``) into each layer's decoder map
    (H, N, N) and cross map (H, N, S); ``size``: (N, S), the maps made at the first step."""
    length, width = size
    for layer, weights in enumerate(capture.weights("decoder")):
        if layer == len(decoder_maps):
            heads = weights.shape[1]
            decoder_maps.append(torch.zeros(heads, length, length))
            cross_maps.append(torch.zeros(heads, length, width))
        decoder_maps[layer][:, position, : position + 1] = weights[0, :, -1]
    for layer, weights in enumerate(capture.weights("cross")):
        cross_maps[layer][:, position] = weights[0, :, -1]


def _first(weights: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The first sequence of each layer's (B, H, T, S) weights: (H, T, S)."""
    return tuple(w[0] for w in weights)


def load_encoder_decoder(
    directory: Path, name: str, max_tokens: int, cache_bytes: int
) -> EncoderDecoder:
    """``(directory, name, max_tokens, cache_bytes) -> EncoderDecoder`` (a registry loader)."""
    return EncoderDecoder.from_dir(directory, name, max_tokens, cache_bytes)
