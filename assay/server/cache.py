"""Parsed-policy cache keyed by path and content digest (docs/server.md, "Shared rules").

The key is `<path below the root>:<sha256 of the bytes read>`, so an edit takes effect on the
next call. Only successful parses are stored: a parse failure or an over-limit file is tried
again on every call. Eviction is approximate LFU: the entry used least often goes first, ties
broken by age. Which bytes to hash (or whether a read can be skipped) is the tool context's
business (:meth:`assay.server.context.ToolContext.load`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from assay.server.log import TARGET_SERVER, Logger, Prepared

__all__ = ["PolicyCache"]


_EVENTS = {name: Prepared("DEBUG", TARGET_SERVER, name, ("key", "cache")) for name in ("cache_hit", "cache_miss")}


class PolicyCache:
    def __init__(self, name: str, capacity: int, logger: Logger | None = None) -> None:
        self.name = name
        self.capacity = capacity
        self._logger = logger
        self._lock = threading.Lock()
        self._entries: dict[str, list[Any]] = {}  # key -> [value, uses, tick]
        self._tick = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def lookup(self, key: str) -> tuple[Any] | None:
        """``(value,)`` for a stored key (counted as a use), else ``None``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            entry[1] += 1
            value = entry[0]
        self._log("cache_hit", key)
        return (value,)

    def get_or_parse(self, key: str, data: bytes, parse: Callable[[bytes], Any]) -> Any:
        """Return the parsed value; ``parse`` raising means nothing is stored."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry[1] += 1
                value = entry[0]
        if entry is not None:
            self._log("cache_hit", key)
            return value
        self._log("cache_miss", key)
        value = parse(data)
        if self.capacity > 0:
            with self._lock:
                if key not in self._entries and len(self._entries) >= self.capacity:
                    victim = min(self._entries, key=lambda k: (self._entries[k][1], self._entries[k][2]))
                    del self._entries[victim]
                self._tick += 1
                self._entries[key] = [value, 1, self._tick]
        return value

    def _log(self, event: str, key: str) -> None:
        if self._logger is not None:
            self._logger.emit(_EVENTS[event], key, self.name)
