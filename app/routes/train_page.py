"""The training page (``/train``): pick a step of the ladder, train it, watch attention form.

A thin shell like the other pages: the presets, the server's limits and a
glimpse of the shipped corpus go to the browser as JSON in a
``<script type="application/json">`` block; the run itself streams from
``POST /api/train``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from attention_core.training import (
    ARCHITECTURES,
    DEFAULT_PROBE,
    FIXED_SETTINGS,
    TRAINING_PRESETS,
    default_text,
)

from ..schemas.pages import Architecture, CorpusGlimpse, TrainPageData
from ..templating import templates
from .train import train_limits

router = APIRouter(include_in_schema=False)
CORPUS_EXCERPT_CHARS = 600


@router.get("/train", response_class=HTMLResponse, name="train_page")
def train_page(request: Request) -> HTMLResponse:
    settings = request.app.state.settings
    corpus = default_text()
    initial = TrainPageData(
        # A list: Jinja's tojson sorts object keys, and the ladder has an order.
        architectures=[Architecture(name=k, description=v) for k, v in ARCHITECTURES.items()],
        presets={name: config.to_dict() for name, config in TRAINING_PRESETS.items()},
        fixed=FIXED_SETTINGS,
        default_probe=DEFAULT_PROBE,
        limits=train_limits(settings),
        corpus=CorpusGlimpse(
            name="bank_stories.txt",
            characters=len(corpus),
            excerpt=corpus[:CORPUS_EXCERPT_CHARS],
        ),
    )
    page = {"page": "train", "title": "Train a tiny GPT"}
    context = {**page, "initial": initial.model_dump(mode="json")}
    return templates.TemplateResponse(request=request, name="train.html", context=context)
