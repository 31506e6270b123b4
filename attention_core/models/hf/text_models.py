"""transformers-backed checkpoints as the app's ``TextModel``s.

A decoder is the package's own ``Decoder`` over a ``TransformersLM`` (maps,
generation with a KV cache, the real head), so everything written for the
hand-written decoders holds for it.  An encoder is ``TransformersEncoder``:
maps and the real head of one text (sentence pairs stay with the
hand-written BERT family).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import SpecError
from ..decoder import TOKENIZER_FILE, Decoder, DecoderMaps
from ..device import CPU, running_on, to_cpu
from ..outputs import LayerTrace
from ..protocols import TextModel, model_info
from ..result_cache import DEFAULT_CACHE_BYTES, ResultCache
from ..text_tokenizer import TextTokenizer, TokenizedText
from .capture import Kind
from .language_model import TransformersLM, TransformersSizes
from .seq2seq import EncoderDecoder

BACKEND = "transformers"


class TransformersEncoder:
    """An encoder checkpoint (RoBERTa and kin) run by transformers with our attention.

    Thread safety: as ``Decoder``'s (eval mode, frozen weights, no state per call).
    """

    causal = False

    def __init__(
        self,
        name: str,
        family: str,
        model: TransformersLM,
        tokenizer: TextTokenizer,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.name = name
        self.family = family
        self.model = model
        self.tokenizer = tokenizer
        self._cache: ResultCache[str, DecoderMaps] = ResultCache(cache_bytes)
        self.device = CPU

    def to_device(self, device: torch.device) -> None:
        """Weights onto ``device``; passes then run there, results come back to the CPU."""
        self.model.to(device)
        self.device = device

    @property
    def config(self) -> TransformersSizes:
        return self.model.config

    @property
    def max_tokens(self) -> int:
        return self.tokenizer.max_tokens

    def info(self) -> dict[str, object]:
        return model_info(self.name, self.family, self.causal, self.config, self.max_tokens)

    def _tokenize(self, text: str, text_b: str | None) -> TokenizedText:
        if text_b is not None:
            raise SpecError(
                f"text_b (a sentence pair) is read by the hand-written BERT family only; "
                f"{self.name} is a {self.family} encoder: put the whole text in text",
                field="text_b",
            )
        tokenized = self.tokenizer.encode(text)
        biggest = max(tokenized.input_ids)
        if biggest >= self.config.vocabulary_size:
            raise SpecError(
                f"{self.name}: tokenizer.json gives token id {biggest}, beyond the model's "
                f"vocabulary of {self.config.vocabulary_size}: the files do not belong together",
                field="model",
            )
        return tokenized

    def encode(self, text: str, text_b: str | None = None) -> DecoderMaps:
        """Every layer's attention and hidden states for ``text`` (or a recent result)."""
        tokenized = self._tokenize(text, text_b)
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        with torch.inference_mode(), running_on(self.device):
            out = self.model(
                torch.tensor([tokenized.input_ids]),
                output_attentions=True,
                output_hidden_states=True,
            )
            maps = DecoderMaps(
                tokenized,
                to_cpu(tuple(a[0] for a in out.attentions)),  # (H, T, T) each
                to_cpu(tuple(h[0] for h in out.hidden_states)),  # (T, C) each
            )
        self._cache.put(text, maps)
        return maps

    def trace(
        self, text: str, layer: int, text_b: str | None = None
    ) -> tuple[TokenizedText, LayerTrace]:
        """Every tensor of layer ``layer`` (0-based) for ``text``; see ``LayerTrace``."""
        tokenized = self._tokenize(text, text_b)
        if not 0 <= layer < self.config.num_layers:
            raise SpecError(
                f"layer {layer + 1} does not exist; this model has layers 1 to "
                f"{self.config.num_layers}",
                field="layer",
            )
        with torch.inference_mode(), running_on(self.device):
            out = self.model(torch.tensor([tokenized.input_ids]), trace_layer=layer)
        if out.trace is None:
            raise RuntimeError(f"{self.family} returned no trace for layer {layer}")
        return tokenized, to_cpu(out.trace)


def load_transformers(
    directory: Path, name: str, max_tokens: int, cache_bytes: int, *, kind: Kind, family: str
) -> TextModel:
    """A decoder, encoder or encoder-decoder checkpoint through transformers (see
    ``language_model``; encoder-decoders: ``seq2seq``)."""
    if kind == "encoder-decoder":
        return EncoderDecoder.from_dir(directory, name, max_tokens, cache_bytes)
    if kind == "decoder":
        return Decoder.from_dir(
            directory,
            lambda d: TransformersLM.load(d, kind),
            family,
            name,
            max_tokens,
            cache_bytes,
        )
    if kind != "encoder":
        raise SpecError(f"{name}: loading an {kind} model is not implemented", field="model")
    tokenizer_path = directory / TOKENIZER_FILE
    if not tokenizer_path.is_file():
        raise SpecError(f"{directory.name}: no {TOKENIZER_FILE}", field="model")
    model = TransformersLM.load(directory, kind)
    context = model.config.max_positions
    if max_tokens >= context:
        limit, source = context, "the model's context"
    else:
        limit, source = max_tokens, "the server's token limit per model input"
    tokenizer = TextTokenizer(tokenizer_path, limit, source)
    return TransformersEncoder(name, family, model, tokenizer, cache_bytes)
