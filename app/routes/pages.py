"""HTML pages: the explorer, the compare view and the lessons.

Pages are thin shells: the data they start with (the presets and the toy
vocabulary) is handed to the browser as JSON in a ``<script type="application/json">``
block, and everything else comes from the JSON API.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attention_core import PRESETS, TOY_VOCABULARY

from ..convert import preset_summary, request_from_spec
from ..templating import templates

router = APIRouter(include_in_schema=False)


@cache
def _initial_data() -> dict[str, Any]:
    """What every page needs before its first request: the presets (summary and
    spec, as ``GET /api/presets/{name}`` gives them) and the toy vocabulary."""
    return {
        "presets": [
            {
                **preset_summary(p),
                "spec": request_from_spec(p.spec).model_dump(mode="json", exclude={"steps"}),
            }
            for p in PRESETS.values()
        ],
        "vocabulary": {word: list(vector) for word, vector in TOY_VOCABULARY.items()},
    }


def _page(request: Request, name: str, page: str, title: str) -> HTMLResponse:
    # The widest vector the API accepts: pages narrow wider (model) vectors to it.
    limits = {"max_dim": request.app.state.settings.max_dim}
    return templates.TemplateResponse(
        request=request,
        name=name,
        context={
            "page": page,
            "title": title,
            "initial": {**_initial_data(), "limits": limits},
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
