"""``GET /api/models``: every model the server can see, supported or not (and why not)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ..model_listing import listing
from ..model_registry import RegistryDep
from ..schemas.model import ModelList
from .common import json_response

router = APIRouter(prefix="/api/models", tags=["model"])


@router.get("", response_model=ModelList)
def list_models(registry: RegistryDep) -> Response:
    """Every model: the built-in MiniLM, shipped checkpoints, ``--model`` paths,
    ``ATTENTION_VIZ_MODELS``, trained runs and the local Hugging Face cache.

    Reads only config.json and safetensors headers; a model that cannot be
    used is listed with ``supported: false`` and the ``reason``.
    """
    return json_response(listing(registry))
