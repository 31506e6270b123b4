"""The notebook API's analyses of a model: ``why`` (one cell's score split over what wrote to
the residual stream) and ``attribute`` (every head's ablation effect, estimated in one pass).

Each returns its data (the API's answer: /api/model/why, /api/model/attribute) with a view
that renders inline (``_repr_html_``) as the /model page's cards draw it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attention_core.analysis import head_model
from attention_core.analysis.attribution import attribute as attribute_heads
from attention_core.analysis.attribution import decoder_heads
from attention_core.analysis.qk_decomposition import why as why_cell

from ..schemas.model import Stack
from ..schemas.why import AttributeRequest, Target, WhyRequest
from ..seq2seq_why_answer import seq2seq_attribute_answer, seq2seq_why_answer
from ..settings import get_settings
from ..why_payloads import attribute_payload, why_payload
from .render import NotebookView
from .views import _loaded_model, _quoted


class Analysis:
    """``data``: the answer as the JSON API gives it (numpy grids); ``view``: its view.
    Shown in a notebook, it draws the view; ``data[...]`` reads the numbers."""

    def __init__(self, data: dict[str, Any], view: NotebookView) -> None:
        self.data = data
        self.view = view

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def _repr_html_(self) -> str:
        return self.view.data

    def __repr__(self) -> str:
        return f"<attention-viz {self.data.get('view')}: {self.view.payload.get('title')}>"


def why(
    model: str | Path,
    text: str,
    layer: int,
    head: int,
    row: int,
    col: int,
    *,
    top: int = 20,
    target: str | None = None,
    stack: Stack | None = None,
) -> Analysis:
    """Layer ``layer``, head ``head`` (from 1)'s pre-softmax score for query token ``row``
    and key token ``col`` (from 0) as (query component, key component) pairs, norms frozen:
    ``score``, ``weight``, ``contributions`` (the ``top`` largest), ``rest``, ``grid``.
    Encoder-decoders: ``target`` the decoder's text, ``stack`` 'encoder' (the default),
    'decoder' or 'cross' (row a target position, col a source token)."""
    loaded = _loaded_model(model)
    if loaded.capabilities.reads_target:
        body = WhyRequest(
            text=text, layer=layer, head=head, row=row, col=col, top=top, target=target, stack=stack
        )
        answer = seq2seq_why_answer(loaded, loaded.name, body)
    else:
        loaded.capabilities.check_fields(loaded.name, target, stack)
        heads = head_model(loaded)
        tokens = heads.tokenize(text)
        result = why_cell(heads, tokens.ids, layer - 1, head - 1, row, col)
        cell = (layer, head, row, col)
        answer = why_payload(loaded.name, loaded.family, list(tokens.tokens), cell, result, top)
    data = answer.model_dump()
    title = f"{loaded.name}: why layer {layer}, head {head} looks from {row} at {col}"
    return Analysis(data, NotebookView({"view": "why", "title": title, "answer": data}))


def attribute(
    model: str | Path,
    text: str,
    method: str = "attribution_patching",
    ablation: str = "zero",
    target: tuple[int, int | None] | str | None = None,
    *,
    confirm_top: int = 3,
    stack: Stack | None = None,
) -> Analysis:
    """Every head's ablation effect on the loss (``target`` None: the text's next-token
    loss; (position, token id or None for the model's own)): ``estimate`` by ``method``
    ("attribution_patching", "atp_star" or "exact", which adds the ``exact`` grid),
    ``ablation`` "zero" or "mean"; the ``confirm_top`` largest estimates ablated exactly.
    Encoder-decoders: ``target`` the decoder's text (needed), the loss the mean −log p of
    its tokens; ``stack`` the grids' ('encoder', the default, 'decoder' or 'cross'),
    ``stacks`` every stack's estimate."""
    loaded = _loaded_model(model)
    if loaded.capabilities.reads_target:
        asked = (
            target
            if isinstance(target, str) or target is None
            else Target(position=target[0], token=target[1])
        )
        body = AttributeRequest(
            text=text,
            method=method,  # type: ignore[arg-type]
            ablation=ablation,  # type: ignore[arg-type]
            target=asked,
            stack=stack,
            confirm_top=confirm_top,
        )
        seq2seq = seq2seq_attribute_answer(loaded, loaded.name, body, get_settings())
        return _attribution_view(loaded.name, text, seq2seq.model_dump())
    loaded.capabilities.check_fields(
        loaded.name, target if isinstance(target, str) else None, stack
    )
    scored = None if isinstance(target, str) else target  # a text: refused just above
    heads = decoder_heads(head_model(loaded), loaded.name)
    tokens = heads.tokenize(text)
    result = attribute_heads(heads, tokens.ids, method, ablation, scored, loaded.name, confirm_top)
    answer = attribute_payload(loaded.name, loaded.family, list(tokens.tokens), heads, result)
    return _attribution_view(loaded.name, text, answer.model_dump())


def _attribution_view(name: str, text: str, data: dict[str, Any]) -> Analysis:
    title = f"{name}: which heads matter for {_quoted(text)}"
    return Analysis(data, NotebookView({"view": "attribute", "title": title, "answer": data}))
