"""transformers-backed checkpoints as the app's ``TextModel``s.

A decoder is the package's own ``Decoder`` over a ``TransformersLM`` (maps,
generation with a KV cache, the real head), so everything written for the
hand-written decoders holds for it.  An encoder is ``TransformersEncoder``:
maps and the real head of one text (sentence pairs stay with the
hand-written BERT family).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import SpecError
from ..base.placement import Placement
from ..base.protocols import TextModel
from ..text.decoder import Decoder
from ..text.text_model_base import TextModelBase, checkpoint_tokenizer, refuse_pair, tokenizer_file
from .capture import Kind
from .language_model import TransformersLM
from .seq2seq import EncoderDecoder

BACKEND = "transformers"


class TransformersEncoder(TextModelBase[TransformersLM]):
    """An encoder checkpoint (RoBERTa and kin) run by transformers with our attention.

    Thread safety: as ``Decoder``'s (eval mode, frozen weights, no state per call).
    """

    causal = False

    def _refuse_pair(self, text_b: str | None) -> None:
        refuse_pair(
            text_b,
            "read by the hand-written BERT family only; "
            f"{self.name} is a {self.family} encoder: put the whole text in text",
        )


def load_transformers(
    directory: Path,
    name: str,
    max_tokens: int,
    cache_bytes: int,
    *,
    kind: Kind,
    family: str,
    placement: Placement | None = None,
) -> TextModel:
    """A decoder, encoder or encoder-decoder checkpoint through transformers (see
    ``language_model``; encoder-decoders: ``seq2seq``), spread by accelerate as
    ``placement`` says when given."""
    if kind == "encoder-decoder":
        return EncoderDecoder.from_dir(directory, name, max_tokens, cache_bytes)
    if kind == "decoder":
        return Decoder.from_dir(
            directory,
            lambda d: TransformersLM.load(d, kind, placement),
            family,
            name,
            max_tokens,
            cache_bytes,
        )
    if kind != "encoder":
        raise SpecError(f"{name}: loading an {kind} model is not implemented", field="model")
    tokenizer_path = tokenizer_file(directory)
    model = TransformersLM.load(directory, kind, placement)
    tokenizer = checkpoint_tokenizer(tokenizer_path, model.config.max_positions, max_tokens)
    return TransformersEncoder(name, family, model, tokenizer, cache_bytes)
