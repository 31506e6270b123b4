"""The real-model page (``/model``): a pretrained encoder's attention, layer by head.

A thin shell like the other pages: it hands the browser its default texts as
JSON in a ``<script type="application/json">`` block; the tokens, attention maps
and word comparisons all come from the ``/api/model`` routes.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ..templating import templates

router = APIRouter(include_in_schema=False)

DEFAULTS: dict[str, Any] = {
    "text": "The cat sat on the mat because it was tired.",
    "text_b": "",
    "compare": {
        "text_a": "the river bank was muddy",
        "text_b": "the bank approved the loan",
        "word": "bank",
    },
}


@router.get("/model", response_class=HTMLResponse, name="model_page")
def model_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(
        request=request,
        name="model.html",
        context={"page": "model", "title": "A real pretrained model", "initial": DEFAULTS},
    )
