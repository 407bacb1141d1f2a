"""The SQLite store's list and reset from synchronous tests: each a ``trio.run`` of the store's
own async method (:meth:`SqliteStore.sessions`, :meth:`SqliteStore.reset`), rows as the plain
values ``assay mcp session list --json`` prints."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import trio

from assay.policy.storeapi import Alive
from assay.store.keys import client_alive
from assay.store.sqlite import SqliteStore


def list_sessions(path: str, timeout: float = 2.0) -> list[dict[str, Any]]:
    store = SqliteStore(path, timeout)
    rows = trio.run(store.sessions, time.time())
    return [msgspec.to_builtins(row) for row in rows]


def reset(path: str, key: str, who: str, now: float | None = None, timeout: float = 2.0) -> bool:
    store = SqliteStore(path, timeout)
    return trio.run(store.reset, key, who, time.time() if now is None else now)


def sweep(path: str, now: float, alive: Alive = client_alive, timeout: float = 2.0) -> int:
    store = SqliteStore(path, timeout)
    return trio.run(store.sweep, now, alive)
