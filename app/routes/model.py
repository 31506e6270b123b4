"""The real-model API: a pretrained encoder's attention maps, word shifts and vectors.

The encoder is loaded once (``load_encoder``, called from the app's lifespan,
or lazily by the first request) and lives on ``app.state.encoder``.  Handlers
are plain ``def`` so FastAPI runs them in its thread pool: a 512-token
forward pass takes a few hundred milliseconds and must not block the event
loop.

Torch threads: ``load_encoder`` sets ``torch.set_num_threads`` once for the
process (default 1, or ``settings.torch_threads`` when that setting exists).
Requests already run in parallel on the thread pool; one intra-op thread per
request avoids OpenMP oversubscription, which on a busy 2-core machine made a
7-token forward pass 20-50x slower with 2 threads than with 1.

Memory: on glibc, ``load_encoder`` also raises malloc's mmap and trim
thresholds (``keep_freed_memory``).  A 512-token layer allocates three
12 MB (heads, T, T) tensors; by default glibc serves each from a fresh mmap,
and the page faults cost ~20-25% of the forward pass.  With the thresholds
raised, freed blocks are reused instead; up to 256 MB of freed memory may stay
resident.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Annotated, Any

import torch
from fastapi import APIRouter, Depends, Request, Response

from attention_core import SpecError
from attention_core.encoder import (
    DECODE_DESCRIPTION,
    Encoder,
    EncoderOutput,
    encode_compact,
    hide_special,
)

from ..limits import LimitError
from ..schemas.model import (
    CompareWordRequest,
    CompareWordResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    ModelAttentionRequest,
    ModelAttentionResponse,
    ModelInfo,
)
from ..settings import Settings, get_settings
from .common import ERRORS, SettingsDep, json_response

router = APIRouter(prefix="/api/model", tags=["model"])
DEFAULT_TORCH_THREADS = 1
# JSON floats cost ~10 bytes each: beyond this, ask for format "compact" or fewer layers.
MAX_JSON_WEIGHTS = 2_000_000

_load_lock = threading.Lock()

# glibc mallopt parameters (malloc.h) and the values load_encoder sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD_BYTES = 256 * 2**20
MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc's maximum on 64-bit


def keep_freed_memory() -> bool:
    """Let glibc reuse freed large blocks instead of unmapping them (see the module doc).

    Process-wide; returns False (and does nothing) where glibc is not the allocator.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
            and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        )
    except (OSError, AttributeError):
        return False


def load_encoder(settings: Settings) -> Encoder:
    """Load the checkpoint named by the settings (default: the packaged MiniLM).

    Also sets torch's intra-op thread count and glibc's malloc thresholds for
    the process (see the module doc).
    """
    threads = getattr(settings, "torch_threads", None) or DEFAULT_TORCH_THREADS
    torch.set_num_threads(threads)
    keep_freed_memory()
    return Encoder.from_dir(settings.model_dir, max_tokens=settings.model_max_tokens)


def get_encoder(request: Request) -> Encoder:
    """``app.state.encoder``, loading it on first use if the lifespan did not."""
    state = request.app.state
    encoder = getattr(state, "encoder", None)
    if encoder is None:
        with _load_lock:
            encoder = getattr(state, "encoder", None)
            if encoder is None:
                settings = getattr(state, "settings", None) or get_settings()
                encoder = state.encoder = load_encoder(settings)
    return encoder


EncoderDep = Annotated[Encoder, Depends(get_encoder)]


def _weights(tensor: torch.Tensor, body: ModelAttentionRequest) -> object:
    if body.format == "compact":
        return encode_compact(tensor, body.dtype).describe()
    return tensor.numpy()


def _layers(body: ModelAttentionRequest, count: int) -> list[int]:
    if body.layers is None:
        return list(range(1, count + 1))
    bad = [layer for layer in body.layers if not 1 <= layer <= count]
    if bad:
        raise SpecError(
            f"layers {bad} do not exist; this model has layers 1 to {count}", field="layers"
        )
    return list(dict.fromkeys(body.layers))


def _attention_payload(encoder: Encoder, body: ModelAttentionRequest) -> dict[str, Any]:
    layers = _layers(body, encoder.config.num_hidden_layers)
    out: EncoderOutput = encoder.encode(body.text, body.text_b)
    tok = out.tokenized
    special = tok.special if body.hide_special else (False,) * len(tok)
    positions = [i for i, s in enumerate(special) if not s]
    T, H = len(positions), encoder.config.num_attention_heads
    if body.format == "json" and len(layers) * (H + 2) * T * T > MAX_JSON_WEIGHTS:
        raise LimitError(
            ["body", "format"],
            f"format 'json' would carry {len(layers) * (H + 2) * T * T} numbers for "
            f"{len(layers)} layers of {T} tokens; the limit is {MAX_JSON_WEIGHTS}: "
            "use format 'compact' or ask for fewer layers",
        )

    def shown(tensor: torch.Tensor) -> torch.Tensor:
        return hide_special(tensor, tok.special) if body.hide_special else tensor

    rollout = out.rollout
    return {
        "model": encoder.config.name,
        "tokens": [tok.tokens[i] for i in positions],
        "token_type_ids": [tok.token_type_ids[i] for i in positions],
        "positions": positions,
        "all_tokens": list(tok.tokens),
        "hide_special": body.hide_special,
        "layers": layers,
        "heads": H,
        "format": body.format,
        "attentions": [_weights(shown(out.layer_attentions[n - 1]), body) for n in layers],
        "head_average": [_weights(shown(out.head_averages[n - 1]), body) for n in layers],
        "rollout": [_weights(shown(rollout[n - 1]), body) for n in layers],
    }


@router.get("", response_model=ModelInfo)
def model_info(encoder: EncoderDep) -> Response:
    """The loaded checkpoint: name, layers, heads, widths, token limit, compact formats."""
    return json_response({**encoder.info(), "compact_formats": DECODE_DESCRIPTION})


@router.post("/attention", response_model=ModelAttentionResponse, responses=ERRORS)
def model_attention(body: ModelAttentionRequest, encoder: EncoderDep) -> Response:
    """WordPiece tokens and every layer's attention, head average and rollout.

    Attentions are (heads, T, T) per layer in Hugging Face's layout: row i is
    the attending token, rows sum to 1.  ``format: "compact"`` sends each
    layer as base64 (1 byte per weight with dtype uint8); ``layers`` fetches
    some layers only (results are cached, so fetching layer by layer is cheap).
    With ``hide_special`` the rollout is computed over all tokens first, then
    [CLS]/[SEP] are dropped and rows renormalized, like the attentions.
    """
    with torch.inference_mode():
        return json_response(_attention_payload(encoder, body))


@router.post("/compare-word", response_model=CompareWordResponse, responses=ERRORS)
def compare_word(body: CompareWordRequest, encoder: EncoderDep) -> Response:
    """How one word's hidden state differs between two texts, layer by layer (cosine)."""
    result = encoder.compare_word(body.text_a, body.text_b, body.word)
    return json_response(
        {
            "model": encoder.config.name,
            "word": result.word,
            "pieces": list(result.pieces),
            "tokens_a": list(result.tokens_a),
            "tokens_b": list(result.tokens_b),
            "span_a": list(result.span_a),
            "span_b": list(result.span_b),
            "cosines": list(result.cosines),
        }
    )


@router.post("/embeddings", response_model=EmbeddingsResponse, responses=ERRORS)
def embeddings(body: EmbeddingsRequest, encoder: EncoderDep, settings: SettingsDep) -> Response:
    """The model's own (context-free) vectors for any words, for the toy explorer."""
    limit = settings.max_vocabulary_words
    if len(body.words) > limit:
        raise LimitError(
            ["body", "words"],
            f"the number of words is {len(body.words)}; the limit is {limit} "
            "(ATTENTION_VIZ_MAX_VOCABULARY_WORDS)",
        )
    for i, word in enumerate(body.words):
        if len(word) > settings.max_token_chars:
            raise LimitError(
                ["body", "words", i],
                f"word {i} is {len(word)} characters; the limit is {settings.max_token_chars} "
                "(ATTENTION_VIZ_MAX_TOKEN_CHARS)",
            )
    pieces = encoder.word_pieces(body.words)
    vectors = encoder.word_vectors(body.words)
    return json_response(
        {
            "model": encoder.config.name,
            "dim": encoder.config.hidden_size,
            "words": body.words,
            "pieces": [list(p) for p in pieces],
            "vectors": vectors.numpy(),
        }
    )
