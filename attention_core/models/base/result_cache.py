"""Recent forward passes, kept within a byte budget, so a client fetching one layer at a
time does not rerun the model (least recently used dropped first)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Sized)

# Two 512-token inputs of a MiniLM-sized model (~80 MB each).
DEFAULT_CACHE_BYTES = 192 * 2**20
# Long inputs keep q and k per layer instead (at 4,096 tokens: GPT-2 small ~300 MB,
# Llama-3.2-1B ~710 MB).
DEFAULT_LONG_CACHE_BYTES = 768 * 2**20


class ResultCache(Generic[K, V]):
    """A thread-safe LRU of results bounded by their ``nbytes`` (0: keep nothing)."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        if value.nbytes > self.max_bytes:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            total = sum(v.nbytes for v in self._items.values())
            while total > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                total -= dropped.nbytes
