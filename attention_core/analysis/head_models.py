"""Which ``HeadModel`` (``access``) serves a loaded model: one per model, kept while it lives.

Above ``access`` and ``hf_access`` both: the transformers backend's ``HeadModel``
is imported only when that backend is (so the hand-written families never import
transformers).
"""

from __future__ import annotations

import sys
import threading
import weakref

from ..errors import SpecError
from ..models.base.protocols import TextModel
from ..models.families.bert import Encoder
from ..models.text.decoder import Decoder
from .access import DecoderHeadModel, EncoderHeadModel, HeadModel

_install_lock = threading.Lock()
_head_models: weakref.WeakKeyDictionary[TextModel, HeadModel] = weakref.WeakKeyDictionary()


def head_model(model: TextModel) -> HeadModel:
    """The ``HeadModel`` of a loaded model (kept while the model lives: hooks go in once)."""
    with _install_lock:
        cached = _head_models.get(model)
        if cached is None:
            cached = _transformers_head_model(model)
            if cached is None and isinstance(model, Decoder):
                cached = DecoderHeadModel(model)
            elif cached is None and isinstance(model, Encoder):
                cached = EncoderHeadModel(model)
            elif cached is None and model.capabilities.reads_target:
                raise SpecError(
                    f"{model.name} is a {model.family} encoder-decoder: the decomposition "
                    "and attribution are for decoder-only and encoder-only models; for this "
                    "model ask for the head scores, the ablation (with target) or the logit "
                    "lens of its stacks",
                    field="model",
                )
            elif cached is None:
                raise SpecError(
                    f"head analysis does not know the {model.family} family yet", field="model"
                )
            _head_models[model] = cached
    return cached


def _transformers_head_model(model: TextModel) -> HeadModel | None:
    """The transformers backend's ``HeadModel`` (``hf_access``), imported only when that
    backend is (so the hand-written families never import transformers)."""
    if "attention_core.models.hf" not in sys.modules:
        return None
    from .hf_access import transformers_head_model

    return transformers_head_model(model)
