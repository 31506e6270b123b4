"""The answers of /api/model/why and /api/model/attribute (layers and heads from 1), built
from the core's ``Why`` and ``Attribution`` as their response models, written once for the
routes and the notebook API (``attention_viz.why``, ``attention_viz.attribute``)."""

from __future__ import annotations

from attention_core.analysis.access import DecoderHeadModel
from attention_core.analysis.attribution import Attribution
from attention_core.analysis.qk_decomposition import Why

from .model_payloads import float_array
from .schemas.model import Stack
from .schemas.why import AttributeResponse, Confirmed, Contribution, HeadRef, Target, WhyResponse


def why_payload(
    model: str,
    family: str,
    tokens: list[str],
    cell: tuple[int, int, int, int],
    result: Why,
    top: int,
    stack: Stack | None = None,
    source_tokens: list[str] | None = None,
) -> WhyResponse:
    """``cell``: (layer, head) from 1, (row, col) from 0; ``top`` pairs listed; ``stack``
    and ``source_tokens``: an encoder-decoder's."""
    layer, head, row, col = cell
    names = result.components
    keys = result.key_components or names
    flat = result.grid.flatten()
    order = flat.abs().argsort(descending=True)[:top].tolist()
    N = len(keys)
    pairs = [
        Contribution(query=names[i // N], key=keys[i % N], value=float(flat[i])) for i in order
    ]
    return WhyResponse(
        model=model,
        family=family,
        tokens=tokens,
        layer=layer,
        head=head,
        row=row,
        col=col,
        score=result.score,
        weight=result.weight,
        scale=result.scale,
        softcap=result.softcap,
        components=list(names),
        key_components=None if result.key_components is None else list(keys),
        stack=stack,
        source_tokens=source_tokens,
        contributions=pairs,
        rest=result.score - sum(p.value for p in pairs) - (result.score_bias or 0.0),
        score_bias=result.score_bias,
        grid=float_array(result.grid),
    )


def attribute_payload(
    model: str, family: str, tokens: list[str], heads: DecoderHeadModel, result: Attribution
) -> AttributeResponse:
    target = result.target
    return AttributeResponse(
        model=model,
        family=family,
        tokens=tokens,
        method=result.method,
        ablation=result.mode,
        target=None if target is None else Target(position=target[0], token=target[1]),
        target_text=None if target is None else heads.token_texts([target[1]])[0],
        loss=result.loss,
        estimate=float_array(result.estimate),
        exact=None if result.exact is None else float_array(result.exact),
        direct=float_array(result.direct),
        graddrop=None if result.graddrop is None else float_array(result.graddrop),
        cancelled=[HeadRef(layer=n + 1, head=h + 1) for n, h in result.cancelled],
        confirmed=[
            Confirmed(layer=n + 1, head=h + 1, estimate=float(result.estimate[n, h]), exact=e)
            for n, h, e in result.confirmed
        ],
    )
