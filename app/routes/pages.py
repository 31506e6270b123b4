"""HTML pages: the explorer, the compare view and the lessons.

Pages are thin shells: the data they start with (the presets and the toy
vocabulary) is handed to the browser as JSON in a ``<script type="application/json">``
block, and everything else comes from the JSON API.
"""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attention_core import PRESETS, TOY_VOCABULARY, SpecError

from ..convert import preset_summary, request_from_spec
from ..family_labels import FAMILY_LABELS
from ..model_registry import get_registry
from ..schemas.pages import PagePreset, ToyPageData
from ..settings import Settings
from ..steps import STEPS
from ..templating import templates
from .api import published_limits

router = APIRouter(include_in_schema=False)


@cache
def _presets() -> list[PagePreset]:
    """The presets, summary and spec, as ``GET /api/presets/{name}`` gives them."""
    return [
        PagePreset(**preset_summary(p).model_dump(), spec=request_from_spec(p.spec))
        for p in PRESETS.values()
    ]


def _model_vectors_available(request: Request) -> bool:
    """Whether ``POST /api/model/embeddings`` can answer: the default model is a supported
    BERT-family encoder (found on disk, not loaded here)."""
    try:
        entry = get_registry(request).entry(None)
    except SpecError:
        return False
    return entry.supported and entry.causal is False and entry.backend == "core"


def page_data(request: Request, settings: Settings) -> ToyPageData:
    """What every toy page needs before its first request: the presets, the toy vocabulary,
    the steps, the limits pages cap their controls to (as ``GET /api/limits``) and whether
    MiniLM word vectors can be asked for."""
    return ToyPageData(
        presets=_presets(),
        vocabulary={word: list(vector) for word, vector in TOY_VOCABULARY.items()},
        steps=list(STEPS),
        family_labels=FAMILY_LABELS,
        limits=published_limits(settings),
        model_vectors=_model_vectors_available(request),
    )


def _page(request: Request, name: str, page: str, title: str) -> HTMLResponse:
    settings = request.app.state.settings
    return templates.TemplateResponse(
        request=request,
        name=name,
        context={
            "page": page,
            "title": title,
            "initial": page_data(request, settings).page_json(),
            "steps": STEPS,
        },
    )


@router.get("/", response_class=HTMLResponse, name="explorer_page")
def explorer_page(request: Request) -> HTMLResponse:
    return _page(request, "explorer.html", "explorer", "Explorer")


@router.get("/compare", response_class=HTMLResponse, name="compare_page")
def compare_page(request: Request) -> HTMLResponse:
    return _page(request, "compare.html", "compare", "Compare two contexts")


@router.get("/lessons", response_class=HTMLResponse, name="lessons_page")
def lessons_page(request: Request) -> HTMLResponse:
    return _page(request, "lessons.html", "lessons", "Lessons")
