"""A decoder's unablated predictions of recent texts, so that ablating another head of the
same text (a page's next click) runs the ablated forward alone (``ablation.ablate``'s
``clean``): one forward instead of two.

Kept per loaded model (while it lives), by the text's ids, within a byte budget
(least recently used dropped first).  The predictions are a few numbers a position
(the next token's log-probability, the top tokens and their probabilities): at
4,096 tokens about 0.2 MB.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from ..models.base.result_cache import ResultCache
from .ablation import Predictions
from .access import HeadModel

CLEAN_CACHE_BYTES = 16 * 2**20  # per model: ~80 texts of 4,096 tokens


class CleanPredictions:
    """``get``/``put`` a decoder's clean ``Predictions`` of a text by its ids."""

    def __init__(self, max_bytes: int = CLEAN_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._models: weakref.WeakKeyDictionary[
            HeadModel, ResultCache[tuple[int, ...], Predictions]
        ] = weakref.WeakKeyDictionary()

    def _cache(self, heads: HeadModel) -> ResultCache[tuple[int, ...], Predictions]:
        with self._lock:
            cache = self._models.get(heads)
            if cache is None:
                cache = self._models[heads] = ResultCache(self.max_bytes)
            return cache

    def get(self, heads: HeadModel, ids: Sequence[int]) -> Predictions | None:
        return self._cache(heads).get(tuple(ids))

    def put(self, heads: HeadModel, ids: Sequence[int], predictions: Predictions | None) -> None:
        if predictions is not None:
            self._cache(heads).put(tuple(ids), predictions)


CLEAN = CleanPredictions()
