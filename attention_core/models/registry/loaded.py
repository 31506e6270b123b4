"""The models in memory: at most ``capacity``, least recently used dropped first.

Thread-safe, and a model is loaded once even when several requests ask for it
at the same moment: the first loads it, the others wait for that load (a
``Future``) instead of starting their own.  A failed load is not remembered,
so a checkpoint fixed on disk loads on the next request.  A dropped model's
memory is freed when the last request still using it finishes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Generic, TypeVar

from ...progress import Cancelled

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LoadedModels(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity is {capacity}; at least one model must fit")
        self.capacity = capacity
        self._ready: OrderedDict[K, V] = OrderedDict()
        self._loading: dict[K, Future[V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K, load: Callable[[], V]) -> V:
        """The model for ``key``, calling ``load()`` only if no one has it or is loading it.

        A waiter whose loader was cancelled (that request left) loads it itself."""
        while True:
            with self._lock:
                if key in self._ready:
                    self._ready.move_to_end(key)
                    return self._ready[key]
                pending = self._loading.get(key)
                if pending is None:
                    pending = self._loading[key] = Future()
                    break
            try:
                return pending.result()
            except Cancelled:
                continue
        try:
            value = load()
        except BaseException as exc:
            with self._lock:
                del self._loading[key]
            pending.set_exception(exc)
            raise
        with self._lock:
            del self._loading[key]
            self._ready[key] = value
            while len(self._ready) > self.capacity:
                self._ready.popitem(last=False)
        pending.set_result(value)
        return value

    def discard(self, predicate: Callable[[K], bool]) -> None:
        """Drop every loaded model whose key matches (e.g. older versions of a checkpoint)."""
        with self._lock:
            for key in [k for k in self._ready if predicate(k)]:
                del self._ready[key]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._ready

    def keys(self) -> list[K]:
        with self._lock:
            return list(self._ready)
