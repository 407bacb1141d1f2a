"""One writer at a time among a gateway's links (docs/serve.md, "Upstreams and the agent session
of a user"): every link has a store object of its own (a store holds one transaction at a time),
and all of them write one database. Without this, two links deciding at once would both ask
SQLite for the write lock, and the one refused would wait in SQLite's busy handler, sleeping in
steps of milliseconds; here the second waits on a trio lock instead, woken the moment the first
commits. Other processes (wraps, another gateway) still meet at SQLite's lock as before.
"""

from __future__ import annotations

import trio

from assay.policy.storeapi import Alive, Expect, Loaded, Saved, SessionKey, SessionRow, Store

__all__ = ["Turns", "TurnStore"]


class Turns:
    """The lock the store objects of one database share in this process."""

    def __init__(self) -> None:
        # a semaphore, not a Lock: a transaction may end in another task than the one that began it
        self.lock = trio.Semaphore(1)

    def locked(self) -> bool:
        return self.lock.value == 0


class TurnStore:
    """A :class:`~assay.policy.storeapi.Store` that holds ``turns`` from :meth:`begin` (or
    :meth:`attempt`) until its transaction ends (commit, abort, an attempt that wrote, a failed
    begin, attempt or commit, close)."""

    def __init__(self, store: Store, turns: Turns) -> None:
        self._store = store
        self._turns = turns
        self._holding = False

    @property
    def where(self) -> str:
        return self._store.where

    async def _take(self) -> None:
        """The turn: at once when no other link holds it (no checkpoint here: the store's own
        call, next, is one), else when the holder's transaction ends."""
        try:
            self._turns.lock.acquire_nowait()
        except trio.WouldBlock:
            await self._turns.lock.acquire()
        self._holding = True

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            self._turns.lock.release()

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        await self._take()
        try:
            return await self._store.begin(session, part, server, now)
        except BaseException:
            self._release()
            raise

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        await self._take()
        try:
            got = await self._store.attempt(session, part, server, expect, saved, now)
        except BaseException:
            self._release()
            raise
        if not isinstance(got, Loaded):
            self._release()  # written and ended; a Loaded: the transaction stays open, the turn held
        return got

    async def commit(self, saved: Saved, now: float) -> int:
        try:
            return await self._store.commit(saved, now)
        finally:
            self._release()

    async def abort(self) -> None:
        try:
            await self._store.abort()
        finally:
            self._release()

    async def sessions(self, now: float) -> list[SessionRow]:
        return await self._store.sessions(now)

    async def reset(self, key: str, who: str, now: float) -> bool:
        return await self._store.reset(key, who, now)

    async def sweep(self, now: float, alive: Alive) -> int:
        return await self._store.sweep(now, alive)

    async def aclose(self) -> None:
        try:
            await self._store.aclose()
        finally:
            self._release()
