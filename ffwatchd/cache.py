"""The one bounded cache of ffwatchd: the least recently used entry goes first, thread-safe.

For what is keyed by a file's version (fs/version.FileVersion) or kept per instance, where
`functools.lru_cache` on a module function does not fit."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")
_MISSING: object = object()


class BoundedCache(Generic[V]):
    """At most `size` values by key; a hit makes its entry the newest."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable, default: V | None = None) -> V | None:
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        """The cached value, or `make()`'s (outside the lock: two threads may both make it)."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = make()
            self.put(key, value)
        return value  # type: ignore[return-value]
