"""Why a head puts its weight on a cell: its score split over what wrote to the residual stream.

For layer ``layer``, head ``head``, query row i and key column j, the
pre-softmax score is ``q_i · k_j × scale``.  With every norm frozen at the
forward's values (``frozen_norm``), q_i and k_j are sums over the components
of the layer's input (``residual_parts``: the embedding, each earlier head,
each earlier MLP) plus a bias term, RoPE being linear at each position
(``qk_paths``), so the score is the sum over (query component, key component)
pairs of ``q_i^(c) · k_j^(c') × scale``: the ``grid``.  Gemma 2 soft-caps the
score after that sum (``softcap · tanh(score / softcap)``, then the softmax):
the pairs add up to the score before the cap, and ``softcap`` says so.  A
sliding window (Mistral, Gemma 2/3's local layers) masks the keys it leaves
out, as the map does.  Families with a score bias are refused with the reason.

``score`` and ``weight`` come from the layer's own q and k (the totals):
the weight is row i's softmax, through ``attention_with_steps``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..attention import attention_with_steps
from ..errors import SpecError
from ..models.families.bert import Encoder
from .access import DecoderHeadModel, EncoderHeadModel, HeadModel
from .qk_paths import QKV, TRANSFORMERS_TYPES, LayerPaths, gpt2_paths, llama_paths, neox_paths
from .residual_parts import Parts, decoder_parts, encoder_parts

BIAS = "biases"


@dataclass(frozen=True)
class Why:
    """``grid`` (N, N): [query component, key component] -> its share of the score; the
    last component, ``biases``, is the projections' biases and the norms' shifts."""

    components: tuple[str, ...]
    grid: torch.Tensor
    score: float
    weight: float
    scale: float
    softcap: float | None = None  # applied after the sum: the map's score is the capped one
    # The key side's components where they differ from the query's (cross-attention: the
    # encoder's output, for a query in the decoder), grid (N_q, N_k); None: ``components``.
    key_components: tuple[str, ...] | None = None
    # The family's score bias (T5's relative position bias), a term of its own: score =
    # the grid's sum + score_bias (before any soft-cap); None: no bias.
    score_bias: float | None = None


def layer_paths(heads: HeadModel, layer: int, length: int) -> LayerPaths:
    """The q/k/v paths of ``layer`` (0-based) for a text ``length`` tokens long."""
    if isinstance(heads, EncoderHeadModel):
        return _bert_paths(heads.encoder, layer)
    if not isinstance(heads, DecoderHeadModel):
        raise SpecError("the decomposition knows decoders and BERT encoders", field="model")
    config = getattr(heads.module, "config", None)
    if type(config).__module__.startswith("transformers"):
        model_type = getattr(config, "model_type", None)
        if model_type not in TRANSFORMERS_TYPES:
            raise SpecError(
                f"the score decomposition does not know the {model_type} family's residual "
                f"stream and attention (it knows {', '.join(sorted(TRANSFORMERS_TYPES))})",
                field="model",
            )
    paths = _paths(heads, layer, length)
    if type(config).__module__.startswith("transformers"):
        paths.window = _window(config, layer)
        cap = getattr(config, "attn_logit_softcapping", None)
        paths.softcap = float(cap) if cap else None
    return paths


def _paths(heads: DecoderHeadModel, layer: int, length: int) -> LayerPaths:
    block = heads.blocks[layer]
    if hasattr(block, "attn") and hasattr(block, "ln_1"):
        return gpt2_paths(block, layer, heads.num_heads)
    if hasattr(block, "attention") and hasattr(block.attention, "query_key_value"):
        return neox_paths(block, heads.num_heads, _rope(heads, length, layer))
    attn = block.get_submodule("self_attn")
    kv_heads = _kv_heads(attn, heads.num_heads, heads.head_dim)
    sizes = (heads.num_heads, kv_heads, heads.head_dim)
    return llama_paths(block, sizes, _rope(heads, length, layer))


def _window(config: object, layer: int) -> int | None:
    """transformers' sliding window of ``layer``: every layer's (Mistral, Phi-3), or the
    layers ``layer_types`` marks "sliding_attention" (Qwen2, Gemma 2/3)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types is not None and types[layer] != "sliding_attention":
        return None
    return int(window) if window else None


def _kv_heads(attn: torch.nn.Module, num_heads: int, head_dim: int) -> int:
    """Key/value heads: k_proj's rows, or (Phi-3's fused qkv_proj) what q leaves, halved."""
    fused = getattr(attn, "qkv_proj", None)
    if fused is not None:
        return (int(fused.out_features) // head_dim - num_heads) // 2
    k_weight = attn.get_submodule("k_proj").weight
    assert isinstance(k_weight, torch.Tensor)
    return int(k_weight.shape[0]) // head_dim


def _rope(heads: DecoderHeadModel, length: int, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (T, R) as the model's forward computes them for a text ``length`` long (R:
    the rotated dimensions of a head, all of them but in GPT-NeoX's partial rotary)."""
    module = heads.module
    own = getattr(module, "rotary_angles", None)
    if callable(own):
        cos, sin = own(0, length)
        return cos.float(), sin.float()
    name = "gpt_neox.rotary_emb" if hasattr(module, "gpt_neox") else "model.rotary_emb"
    rotary = module.get_submodule(name)
    positions = torch.arange(length)[None]
    if "layer_type" in inspect.signature(rotary.forward).parameters:  # Gemma 3: per layer kind
        kind = getattr(module.config, "layer_types", [None] * (layer + 1))[layer]
        cos, sin = rotary(torch.zeros(1, length, 1), positions, kind)
    else:
        cos, sin = rotary(torch.zeros(1, length, 1), positions)
    return cos[0].float(), sin[0].float()


def _bert_paths(encoder: Encoder, layer: int) -> LayerPaths:
    """BERT's layer: its input is already normed (post-norm); one fused q/k/v Linear."""
    c, w = encoder.config, encoder.layers[layer]
    C, H, D = c.hidden_size, c.num_attention_heads, c.head_dim

    def part(k: int) -> object:
        return lambda x: torch.nn.functional.linear(
            x, w.W_qkv[k * C : (k + 1) * C].float(), w.b_qkv[k * C : (k + 1) * C].float()
        )

    q, k, v = (part(n) for n in range(3))
    return LayerPaths(None, (q, k, v), C, (H, H, D), D**-0.5)  # type: ignore[arg-type]


def check_cell(heads: HeadModel, length: int, layer: int, head: int, row: int, col: int) -> None:
    """0-based layer/head/row/col: a ``SpecError`` naming the field out of range, or the
    masked cell (a decoder's column after its row)."""
    for field, value, size in (
        ("layer", layer, heads.num_layers),
        ("head", head, heads.num_heads),
    ):
        if not 0 <= value < size:
            raise SpecError(
                f"{field} is {value + 1}; this model has {field}s 1 to {size}", field=field
            )
    for field, value in (("row", row), ("col", col)):
        if not 0 <= value < length:
            raise SpecError(
                f"{field} is {value}; the text has {length} tokens (0 to {length - 1})", field=field
            )
    if heads.causal and col > row:
        raise SpecError(
            f"the cell ({row}, {col}) is masked: a decoder's query {row} sees keys 0 to {row}",
            field="col",
        )


def why(heads: HeadModel, ids: Sequence[int], layer: int, head: int, row: int, col: int) -> Why:
    """The decomposition of one cell's score (layer, head, row, col all 0-based)."""
    T = len(ids)
    check_cell(heads, T, layer, head, row, col)
    paths = layer_paths(heads, layer, T)
    if paths.window is not None and abs(row - col) >= paths.window:
        raise SpecError(
            f"the cell ({row}, {col}) is masked: layer {layer + 1}'s sliding window shows a "
            f"query the {paths.window} keys nearest it",
            field="col",
        )
    with torch.no_grad():
        parts = _parts(heads, ids, layer, torch.tensor([row, col]))
        grid = pair_grid(paths, head, Side.of(parts, 0, row), Side.of(parts, 1, col))
        score, weight = _cell(paths, parts.layer_input, heads.causal, head, row, col)
    return Why((*parts.names, BIAS), grid, score, weight, paths.scale, paths.softcap)


@dataclass(frozen=True)
class Side:
    """One side of a cell: the components of the layer's input at one position ``parts``
    (N, 1, C), what no component carries ``bias`` (1, C), the input itself ``x`` (1, C),
    where the norms are frozen, and the ``position`` (RoPE's)."""

    parts: torch.Tensor
    bias: torch.Tensor
    x: torch.Tensor
    position: int

    @classmethod
    def of(cls, parts: Parts, index: int, position: int) -> Side:
        """Position ``index`` of ``parts``' positions, which is the text's ``position``."""
        at = slice(index, index + 1)
        return cls(parts.parts[:, at], parts.bias[at], parts.layer_input[[position]], position)


def side_vectors(paths: LayerPaths, side: Side) -> QKV:
    """Each component's q, k, v at the side's position, then the biases' (the projections'
    and whatever the stream carried as no component's): (N + 1, 1, heads, D)."""
    positions = torch.tensor([side.position])
    norms = paths.freeze(side.x)
    each = paths.project(side.parts, positions, norms)
    bias = paths.bias(positions, norms)
    carried = paths.project(side.bias[None], positions, norms)
    return QKV(
        *(
            torch.cat([e, b + c])
            for e, b, c in zip(
                (each.q, each.k, each.v),
                (bias.q, bias.k, bias.v),
                (carried.q, carried.k, carried.v),
                strict=True,
            )
        )
    )


def pair_grid(
    paths: LayerPaths, head: int, query: Side, key: Side, key_paths: LayerPaths | None = None
) -> torch.Tensor:
    """(N_q, N_k): q_row^(c) · k_col^(c') × scale for every (query, key) component pair
    (``key_paths``: the key side's, where it reads another stream, e.g. T5's cross-attention
    its keys without the query side's norm)."""
    kv = head // (paths.num_heads // paths.num_kv_heads)
    q = side_vectors(paths, query).q[:, 0, head]
    k = side_vectors(key_paths or paths, key).k[:, 0, kv]
    return q @ k.T * paths.scale


def _parts(heads: HeadModel, ids: Sequence[int], layer: int, positions: torch.Tensor) -> Parts:
    if isinstance(heads, EncoderHeadModel):
        return encoder_parts(heads.encoder, ids, layer, positions)
    assert isinstance(heads, DecoderHeadModel)
    return decoder_parts(heads, ids, layer, positions)


def _cell(
    paths: LayerPaths, x: torch.Tensor, causal: bool, head: int, row: int, col: int
) -> tuple[float, float]:
    """The cell's score (before any soft-cap) and weight from the layer's own q and k (row
    ``row``'s softmax over the keys it sees)."""
    first = 0 if paths.window is None else max(0, row - paths.window + 1)
    last = row + 1 if causal else x.shape[0]
    if paths.window is not None and not causal:
        last = min(last, row + paths.window)
    keys = torch.arange(first, last)
    return cell_weight(paths, head, (x[[row]], row), (x[keys], keys), col - first)


def cell_weight(
    paths: LayerPaths,
    head: int,
    query: tuple[torch.Tensor, int],
    keys: tuple[torch.Tensor, torch.Tensor],
    col: int,
    key_paths: LayerPaths | None = None,
    bias: torch.Tensor | None = None,
) -> tuple[float, float]:
    """The score and softmax weight of key ``col`` (an index into ``keys``) for one query:
    ``query`` its input (1, C) and position, ``keys`` theirs, (S, C) and (S,), the keys that
    query's softmax reads (``key_paths``: see ``pair_grid``; ``bias`` (1, S): the family's
    score bias, in the score)."""
    kv = head // (paths.num_heads // paths.num_kv_heads)
    x, position = query
    q = paths.totals(x, torch.tensor([position])).q[0, 0, head][None]  # (1, D)
    k = (key_paths or paths).totals(*keys).k[0, :, kv]  # (S, D)
    steps = attention_with_steps(q, k, k, scale=paths.scale, softcap=paths.softcap, score_bias=bias)
    score = float(steps.scaled_scores[0, col]) + (0.0 if bias is None else float(bias[0, col]))
    return score, float(steps.attn_weights[0, col])
