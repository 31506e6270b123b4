"""The HTML pages' initial data: the JSON each page embeds in its
``<script type="application/json" id="initial-data">`` block.

Typed like every JSON answer: where the data is an API answer's, it is that
answer's model (``Limits``, ``PresetSummary``, ``ModelSummary``, ``TrainPresets``'
fields); the rest is described here.  Jinja's ``tojson`` sorts object keys, so a
list stands wherever the order counts (the ladder's steps).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..steps import Step
from .attention import AttentionRequest, Limits, PresetSummary
from .model import ModelSummary
from .train import TrainLadder

# ---- the explorer, compare and lessons pages ---------------------------------------------


class PagePreset(PresetSummary):
    """A preset as ``GET /api/presets/{name}`` gives it (its spec without ``steps``)."""

    spec: AttentionRequest


class ToyPageData(BaseModel):
    """``/``, ``/compare`` and ``/lessons``: what they need before their first request."""

    presets: list[PagePreset]
    vocabulary: dict[str, list[float]] = Field(description="the toy vocabulary's vectors")
    steps: list[Step] = Field(description="the steps of one attention layer, in order")
    family_labels: dict[str, str]
    limits: Limits = Field(description="as GET /api/limits")
    model_vectors: bool = Field(description="whether POST /api/model/embeddings can answer")

    def page_json(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude={"presets": {"__all__": {"spec": {"steps"}}}})


# ---- the model page ----------------------------------------------------------------------


class ModelOption(ModelSummary):
    """A model of ``GET /api/models`` with what the picker says of it."""

    label: str = Field(description="the picker's line: name and what it is, or why not")
    about: str = Field(description="one line about it (the reason, when unsupported)")


class ModelOptions(BaseModel):
    default: str | None
    models: list[ModelOption]


class CompareTexts(BaseModel):
    text_a: str
    text_b: str
    word: str


class ModelTexts(BaseModel):
    """The texts the model page's forms start with."""

    text: str
    text_b: str
    prompt: str
    max_new_tokens: int
    compare: CompareTexts


class ModelPageLimits(BaseModel):
    max_new_tokens: int
    max_vocabulary_words: int
    max_token_chars: int


class ModelPageData(ModelTexts):
    models: ModelOptions
    score_names: list[str] = Field(description="the head scores' names, for 'Sort by'")
    limits: ModelPageLimits


# ---- the training page -------------------------------------------------------------------


class Architecture(BaseModel):
    name: str
    description: str


class CorpusGlimpse(BaseModel):
    name: str
    characters: int
    excerpt: str = Field(description="the corpus's first characters")


class TrainPageData(TrainLadder):
    architectures: list[Architecture] = Field(description="the ladder's steps, in order")
    corpus: CorpusGlimpse
