"""A store that behaves like a networked one (docs/architecture.md, "The Store interface"): every
call takes ``latency`` seconds (``trio.sleep``), the write transaction is a lock of the backing
held from ``begin`` to ``commit``/``abort`` (a second store object waits for it, as a second
machine waits for the database's row lock), and ``fail`` makes every call raise
:class:`StoreError` with that cause. Several :class:`SlowStore` objects on one :class:`Backing`
are several processes (or machines) on one database.

It is one class and nothing else: the wrap and ``assay mcp session`` take it as they take the
SQLite store (tests/sessions/test_store_contract.py). :meth:`SlowStore.attempt` is one round trip,
as a networked store's would be (one statement batch that checks and writes under the row lock). The data model is
:class:`assay.policy.storeapi.MemoryStore`'s, one twin per store object.
"""

from __future__ import annotations

import trio

from assay.policy.storeapi import Alive, Expect, Loaded, MemoryStore, Saved, SessionKey, SessionRow, StoreError


class Backing:
    """The "database": the sessions and its one write lock."""

    def __init__(self, alive: Alive | None = None) -> None:
        self.data = MemoryStore() if alive is None else MemoryStore(alive)
        # the write lock: a semaphore of one, as trio.Lock's owner must be the task that took it and
        # a transaction may end in another task than it began
        self.lock = trio.Semaphore(1)


class SlowStore:
    def __init__(self, backing: Backing, latency: float = 0.01) -> None:
        self.backing = backing
        self.latency = latency
        self.fail: str | None = None
        self._data = backing.data.twin()
        self._holding = False
        self.where = "slow store in memory"

    async def _trip(self) -> None:
        await trio.sleep(self.latency)
        if self.fail is not None:
            raise StoreError(self.fail)

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        if self._holding:
            raise RuntimeError("SlowStore: a transaction is already open")
        await self._trip()
        await self.backing.lock.acquire()  # waits for another store object's transaction
        self._holding = True
        try:
            loaded = self._data.begin_blocking(session, part, server, now)
        except BaseException:
            self._release()
            raise
        return loaded

    async def commit(self, saved: Saved, now: float) -> int:
        if not self._holding:
            raise RuntimeError("SlowStore: no transaction is open")
        try:
            await self._trip()
            version = self._data.commit_blocking(saved, now)
            return version
        except BaseException:
            self._data.abort_blocking()
            raise
        finally:
            self._release()

    async def abort(self) -> None:
        self._data.abort_blocking()
        self._release()

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        if self._holding:
            raise RuntimeError("SlowStore: a transaction is already open")
        await self._trip()  # one round trip: the check and the write go together
        await self.backing.lock.acquire()
        self._holding = True
        try:
            got = self._data.attempt_blocking(session, part, server, expect, saved, now)
        except BaseException:
            self._data.abort_blocking()
            self._release()
            raise
        if not isinstance(got, Loaded):
            self._release()  # written and ended
        return got  # else: another writer came first; the transaction stays open

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            self.backing.lock.release()

    async def sessions(self, now: float) -> list[SessionRow]:
        await self._trip()
        async with self.backing.lock:
            return await self._data.sessions(now)

    async def reset(self, key: str, who: str, now: float) -> bool:
        await self._trip()
        async with self.backing.lock:
            return await self._data.reset(key, who, now)

    async def sweep(self, now: float, alive: Alive) -> int:
        await self._trip()
        async with self.backing.lock:
            return await self._data.sweep(now, alive)

    async def aclose(self) -> None:
        if self._holding:
            await self.abort()
