"""A BERT-family encoder whose every attention step is ``attention_with_steps``.

Only ``safetensors`` and ``tokenizers`` are needed at run time (no
``transformers``, no hub, no network).  The forward pass is Hugging Face's
``BertModel`` in eval mode, written out as plain tensor code:

    x = LayerNorm(word[ids] + token_type[type_ids] + position[0..T-1])
    per layer:  a = LayerNorm(x + W_out · attention(x) + b_out)
                x = LayerNorm(a + W_down · gelu(W_up · a + b_up) + b_down)

Dropout is the identity (inference), so the maps are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Unpack

import torch
import torch.nn.functional as F

from ....attention import AttentionSteps, attention_with_steps
from ....blocked_attention import AttentionCall
from ....errors import MODEL_CONTEXT, MODEL_MAX_TOKENS, LimitExceeded, SpecError
from ....progress import report
from ...base.capabilities import Capabilities, OneStack, Target, WordComparison
from ...base.contract import (
    NO_OPTIONS,
    KeptStack,
    ModelPass,
    PassKey,
    PassOptions,
    cached_pass,
)
from ...base.device import CPU, move, running_on, to_cpu
from ...base.outputs import LayerTrace, check_layer
from ...base.protocols import ModelSummary, model_info
from ...base.result_cache import DEFAULT_CACHE_BYTES, DEFAULT_LONG_CACHE_BYTES, ResultCache
from ...base.writing import Sampling, Written, refuse_writing
from ...checkpoints.files import CONFIG_FILE, TOKENIZER_FILE
from ...checkpoints.weight_dtype import float32_copy
from ...maps.blocked_pass import BlockedPass
from ...maps.text_maps import TokenizedMaps
from .config import DEFAULT_MODEL_NAME, EncoderConfig, resolve_model_dir
from .tokenizer import Tokenized, WordPieceTokenizer
from .weights import EmbeddingWeights, LayerWeights, load_weights
from .words import find_word, layer_cosines


@dataclass(frozen=True)
class EncoderOutput(TokenizedMaps):
    """What one forward pass returns, in Hugging Face's layout without the batch axis.

    Shapes: ``layer_attentions[l]`` (H, T, T), rows = the attending token and
    summing to 1; ``attentions`` (L, H, T, T); ``hidden_states`` (L+1, T, hidden),
    index 0 = the embedding output, index l = the output of layer l.
    """

    tokenized: Tokenized
    layer_attentions: tuple[torch.Tensor, ...]
    layer_hidden_states: tuple[torch.Tensor, ...]

    @property
    def token_type_ids(self) -> tuple[int, ...]:
        return self.tokenized.token_type_ids


def _activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if name == "gelu":
        return F.gelu  # exact (erf) GELU, as Hugging Face's "gelu"
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda t: F.gelu(t, approximate="tanh")
    return F.relu


def _layer_trace(
    layer: int,
    x: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    steps: AttentionSteps,
) -> LayerTrace:
    """One layer's tensors with a batch axis of 1 in front, as decoders give them."""
    batched = replace(
        steps,
        attn_scores=steps.attn_scores[None],  # (1, H, T, T)
        scaled_scores=steps.scaled_scores[None],
        masked_scores=steps.masked_scores[None],
        attn_weights=steps.attn_weights[None],
        context_vec=steps.context_vec[None],  # (1, H, T, D)
    )
    return LayerTrace(
        layer=layer, x=x[None], q=query[None], k=key[None], v=value[None], steps=batched
    )


def _attention(
    layer: int,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    blocked: BlockedPass | None,
) -> AttentionSteps:
    """One layer's attention, or the forward's blocked pass's (one text: (H, T, D) each,
    given the batch axis of 1 a pass takes and returned without it)."""
    if blocked is None:
        return attention_with_steps(query, key, value)
    if query.dim() == 4:  # a batch of texts (B, H, T, D): head analysis's edited passes
        return blocked.steps(layer, AttentionCall(query, key, value))
    steps = blocked.steps(layer, AttentionCall(query[None], key[None], value[None]))
    return replace(steps, context_vec=steps.context_vec[0])


@dataclass(eq=False, repr=False)
class Encoder(OneStack):
    """A loaded checkpoint: tokenizer, weights, and the forward pass.

    ``encode`` keeps its most recent results (up to ``cache_bytes`` of tensors)
    so a client fetching one layer at a time does not rerun the model.

    Thread safety: weights are read-only after load and the forward pass keeps
    no state, so several threads may call it at once.  Torch's intra-op thread
    count is the caller's choice (``torch.set_num_threads``); the web app sets
    it once at start-up (see ``app.routes.model.load_encoder``).
    """

    config: EncoderConfig
    tokenizer: WordPieceTokenizer
    embeddings: EmbeddingWeights
    layers: tuple[LayerWeights, ...]
    cache_bytes: InitVar[int] = DEFAULT_CACHE_BYTES

    def __post_init__(self, cache_bytes: int) -> None:
        self._act = _activation(self.config.hidden_act)
        self._cache: ResultCache[tuple[str, str | None], EncoderOutput] = ResultCache(cache_bytes)
        self.long_cache: ResultCache[PassKey, ModelPass] = ResultCache(DEFAULT_LONG_CACHE_BYTES)
        self.device = CPU

    def to_device(self, device: torch.device, dtype: torch.dtype | None = None) -> None:
        """Weights onto ``device`` (held as ``dtype``; None: as stored); passes then run
        there, results come back to the CPU."""
        self.embeddings = move(self.embeddings, device, dtype)
        self.layers = move(self.layers, device, dtype)
        self.device = device

    family = "bert"
    causal = False

    @property
    def name(self) -> str:
        return self.config.name

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path | None = None,
        max_tokens: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        name: str | None = None,
    ) -> Encoder:
        """Load ``config.json`` + safetensors weights + ``tokenizer.json`` from a directory.

        ``model_dir=None`` loads the packaged all-MiniLM-L6-v2.  ``max_tokens``
        (default: the position-embedding size) may lower the limit; a larger
        value is capped at the position-embedding size.  ``name`` defaults to
        the directory's name.
        """
        path = resolve_model_dir(model_dir)
        if name is None:
            name = DEFAULT_MODEL_NAME if model_dir is None else path.name
        config = EncoderConfig.from_file(path / CONFIG_FILE, name)
        limit, setting = config.max_position_embeddings, MODEL_CONTEXT
        if max_tokens is not None:
            if max_tokens < 3:
                raise SpecError(
                    f"max_tokens ({max_tokens}) must be at least 3 ([CLS], a token, [SEP])",
                    field="model_max_tokens",
                )
            if max_tokens < limit:
                limit, setting = max_tokens, MODEL_MAX_TOKENS
        tokenizer = WordPieceTokenizer(path / TOKENIZER_FILE, limit, setting)
        embeddings, layers = load_weights(path, config)
        return cls(config, tokenizer, embeddings, layers, cache_bytes)

    @property
    def max_tokens(self) -> int:
        return self.tokenizer.max_tokens

    def info(self) -> ModelSummary:
        return model_info(self.config.name, self.family, self.causal, self.config, self.max_tokens)

    @property
    def capabilities(self) -> Capabilities:
        """One stack, the encoder; its WordPiece vocabulary answers word questions."""
        return Capabilities(("encoder",), words=self)

    def write(self, prompt: str, max_new_tokens: int, **sampling: Unpack[Sampling]) -> Written:
        """An encoder writes nothing."""
        raise refuse_writing(self.name, self.family, self.capabilities)

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    # --- the forward pass -------------------------------------------------------------

    def tokenize(self, text: str, text_b: str | None = None, *, field: str = "text") -> Tokenized:
        """``text`` (and ``text_b``) in WordPieces; ``field``: the request's name for
        ``text`` (its errors say ``text``: a pair's two texts are told apart by it)."""
        return self.tokenizer.tokenize(text, text_b)

    def encode(self, text: str, text_b: str | None = None) -> EncoderOutput:
        """Tokenize and run the model (or reuse a recent result).  Shapes: see ``EncoderOutput``.

        The returned tensors are inference tensors: in-place edits raise.
        """
        key = (text, text_b)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        tokenized = self.tokenize(text, text_b)
        with running_on(self.device):
            attentions, hidden = to_cpu(
                self.forward(
                    torch.tensor(tokenized.input_ids), torch.tensor(tokenized.token_type_ids)
                )
            )
        output = EncoderOutput(tokenized, attentions, hidden)
        self._cache.put(key, output)
        return output

    def head_outputs(self, stack: str, layer: int) -> torch.Tensor:
        """Each head's slice of layer ``layer``'s output projection, (H, D, C)."""
        W = self.layers[layer].W_out  # (C, H*D), nn.Linear layout
        return W.T.reshape(self.config.num_attention_heads, self.config.head_dim, -1)

    def forward_stacks(
        self,
        text: str,
        *,
        text_b: str | None = None,
        target: Target | None = None,
        options: PassOptions = NO_OPTIONS,
    ) -> ModelPass:
        """The contract's pass (``contract.ModelPass``): the ``encoder`` stack of ``text``
        (and ``text_b``), every layer's q/k kept, no map held whole."""
        self.capabilities.check_fields(self.name, target)
        run = partial(self._pass, text, text_b)
        return cached_pass(self.long_cache, (text, text_b, None), options, run)

    def _pass(self, text: str, text_b: str | None, options: PassOptions) -> ModelPass:
        tokenized = self.tokenize(text, text_b)
        ids, types = torch.tensor(tokenized.input_ids), torch.tensor(tokenized.token_type_ids)
        self._check_length(ids)
        outputs = partial(self.head_outputs, "encoder")
        pass_ = options.long_pass(len(self.layers), False, tokenized, head_outputs=outputs)
        with torch.inference_mode(), running_on(self.device):
            _, hidden, _ = self.forward_layers(ids, types, blocked=pass_)
        stack = KeptStack(
            "encoder",
            tokenized,
            tokenized,
            to_cpu(pass_.kept()),
            tokenized.token_type_ids,
            pass_.query,
            tuple(pass_.grids[i].to_cpu() for i in sorted(pass_.grids)),
            to_cpu(tuple(pass_.averages[i] for i in sorted(pass_.averages))),
            to_cpu(hidden) if options.hidden_states else (),
        )
        return ModelPass((stack,))

    def trace(
        self,
        text: str,
        layer: int,
        text_b: str | None = None,
        blocked: BlockedPass | None = None,
    ) -> tuple[Tokenized, LayerTrace]:
        """Every tensor of layer ``layer`` (0-based) for one text, batch axis 1 first.

        Shapes: see ``LayerTrace`` (x is the layer's input: the previous
        layer's output, already LayerNormed, as BERT is post-norm).  ``blocked``:
        every layer's attention goes to this pass (the traced one's steps: the pass's).
        """
        check_layer(layer, self.config.num_hidden_layers)
        tokenized = self.tokenize(text, text_b)
        with running_on(self.device):
            ids = torch.tensor(tokenized.input_ids)
            types = torch.tensor(tokenized.token_type_ids)
            self._check_length(ids)
            with torch.inference_mode():
                _, _, trace = self.forward_layers(ids, types, trace_layer=layer, blocked=blocked)
        if trace is None:  # unreachable: the layer index was checked above
            raise RuntimeError(f"layer {layer} was not traced")
        return tokenized, to_cpu(trace)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """Per-layer attentions and hidden states for one sequence.

        Shapes: input_ids, token_type_ids (T,) int64 -> (L tensors (H, T, T),
        L+1 tensors (T, hidden)).
        """
        self._check_length(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        with torch.inference_mode():
            attentions, hidden, _ = self.forward_layers(input_ids, token_type_ids)
        return attentions, hidden

    def _check_length(self, input_ids: torch.Tensor) -> None:
        (T,) = input_ids.shape
        if T == 0:
            raise SpecError("input_ids is empty; give at least one token", field="text")
        if T > self.config.max_position_embeddings:
            raise LimitExceeded(
                f"{T} tokens exceed the position-embedding size "
                f"({self.config.max_position_embeddings})",
                field="text",
                limit=self.config.max_position_embeddings,
                found=T,
                setting=MODEL_CONTEXT,
            )

    def forward_layers(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        trace_layer: int | None = None,
        edit_context: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
        blocked: BlockedPass | None = None,
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], LayerTrace | None]:
        """Every layer's attentions and hidden states (and layer ``trace_layer``'s trace),
        without ``forward``'s length check and inference mode: the caller's (head analysis
        runs batches of edited passes through it).

        ids (T,), or (B, T) for a batch (then every shape below gains B in front).
        ``edit_context(layer, context (…, T, C))`` may replace each layer's
        concatenated head outputs before the output projection (head ablation).
        ``blocked``: every layer's attention goes to this pass (``blocked_pass``).
        """
        c, e = self.config, self.embeddings
        H, D, C = c.num_attention_heads, c.head_dim, c.hidden_size
        *lead, T = input_ids.shape
        eps = c.layer_norm_eps
        e = float32_copy(
            replace(e, word=e.word[input_ids], token_type=e.token_type[token_type_ids])
        )
        x = e.word + e.token_type  # (T, C): the rows looked up in the held dtype, then float32
        x += e.position[:T]
        x = F.layer_norm(x, (C,), e.norm_weight, e.norm_bias, eps)  # (T, C)
        hidden_states = [x]
        attentions = []
        trace = None
        for index, held in enumerate(self.layers):
            w = float32_copy(held)  # 16-bit weights: float32 for this layer's forward only
            qkv = F.linear(x, w.W_qkv, w.b_qkv)  # (T, 3C)
            # (T, 3C) -> (T, 3, H, D) -> (3, H, T, D): query, key, value per head
            query, key, value = qkv.view(*lead, T, 3, H, D).movedim(-3, 0).transpose(-3, -2)
            steps = _attention(index, query, key, value, blocked)  # weights (H, T, T)
            attentions.append(steps.attn_weights)
            if index == trace_layer:
                trace = _layer_trace(index, x, query, key, value, steps)
            # (H, T, D) -> (T, H, D) -> (T, C): heads side by side again
            context_vec = steps.context_vec.transpose(-3, -2).reshape(*lead, T, C)
            if edit_context is not None:
                context_vec = edit_context(index, context_vec)
            del steps, qkv, query, key, value  # free the (H, T, T) scores before the MLP
            attn_out = F.linear(context_vec, w.W_out, w.b_out)  # (T, C)
            attn_out += x
            attn_out = F.layer_norm(attn_out, (C,), w.attn_norm_weight, w.attn_norm_bias, eps)
            up = self._act(F.linear(attn_out, w.W_up, w.b_up))  # (T, intermediate)
            down = F.linear(up, w.W_down, w.b_down)  # (T, C)
            down += attn_out
            x = F.layer_norm(down, (C,), w.out_norm_weight, w.out_norm_bias, eps)  # (T, C)
            hidden_states.append(x)
            report("forward", index + 1, len(self.layers))
        return tuple(attentions), tuple(hidden_states), trace

    # --- real vectors ----------------------------------------------------------------

    def word_vectors(self, words: Sequence[str]) -> torch.Tensor:
        """Rows of the word-embedding table, averaged over each word's WordPieces.

        No position or token-type embedding and no LayerNorm: the vector a word
        has before any context.  Shapes: n words -> (n, hidden).
        """
        if not words:
            raise SpecError("words is empty; give at least one word", field="words")
        pieces = self.tokenizer.pieces_batch(list(words))
        table = self.embeddings.word
        return torch.stack([table[list(ids)].float().mean(dim=0) for _, ids in pieces]).cpu()

    def word_pieces(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """How each word splits into WordPieces (e.g. 'unbelievable' -> 'un', '##bel…')."""
        return [tokens for tokens, _ in self.tokenizer.pieces_batch(list(words))]

    def compare_word(self, text_a: str, text_b: str, word: str) -> WordComparison:
        """Cosine similarity of ``word``'s hidden state in two texts, per layer.

        Layer 0 is the embedding output, layer L the last layer.  A word split
        into several WordPieces is the mean of its pieces; the first whole-word
        occurrence in each text is used.
        """
        pieces, piece_ids = self.tokenizer.pieces(word, field="word")
        tokens_a, tokens_b = self.tokenize(text_a), self.tokenize(text_b)
        span_a = find_word(tokens_a, piece_ids, word, pieces, field="text_a")
        span_b = find_word(tokens_b, piece_ids, word, pieces, field="text_b")
        return WordComparison(
            word=word,
            pieces=pieces,
            tokens_a=tokens_a.tokens,
            tokens_b=tokens_b.tokens,
            span_a=span_a,
            span_b=span_b,
            cosines=layer_cosines(self._states(text_a), self._states(text_b), span_a, span_b),
        )

    def _states(self, text: str) -> tuple[torch.Tensor, ...]:
        """Every layer's states of ``text`` (L + 1 of (T, C)), from the contract's pass: no
        map held whole, at any length."""
        return (
            self.forward_stacks(text, options=PassOptions(hidden_states=True)).stack().hidden_states
        )
