"""The store of this machine's shared sessions and its upkeep while a wrap runs (docs/wrap.md,
"Shared sessions").

:func:`open_store` is the one place that says which :class:`assay.policy.storeapi.Store` a state
directory means (the SQLite file in it, :mod:`assay.store.sqlite`); ``assay mcp wrap`` and
``assay mcp session list|reset`` both take theirs from it and use nothing but the interface.
Another store (a networked one, for a gateway on several machines) is another class returned
here; nothing else changes.

:func:`serving` is a wrap's hold on its store: swept (:meth:`Store.sweep`) when the wrap starts
and then every :data:`SWEEP_EVERY` seconds, with this machine's liveness of a client
(:func:`assay.store.keys.client_alive`), and closed (:meth:`Store.aclose`) when the wrap ends.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import trio

from assay.policy.storeapi import Alive, Store, StoreError
from assay.store.keys import client_alive
from assay.statedir import db_path

__all__ = ["SWEEP_EVERY", "keep_swept", "open_store", "serving"]

SWEEP_EVERY = 60.0  # a wrap looks for expired sessions when it starts, then this often


def open_store(directory: str, timeout: float = 2.0) -> Store:
    """The store of the state directory ``directory`` (nothing is opened or created yet):
    ``sessions.db`` in it. ``timeout``: how long a transaction waits for another's."""
    from assay.store.sqlite import SqliteStore  # sqlite3 only for a policy that shares state

    return SqliteStore(db_path(directory), timeout=timeout)


async def keep_swept(
    store: Store,
    *,
    clock: Callable[[], float] = time.time,
    alive: Alive = client_alive,
    every: float = SWEEP_EVERY,
    swept: Callable[[int], None] | None = None,
) -> None:
    """Sweep ``store`` now and then every ``every`` seconds, until cancelled. A store that
    fails is tried again at the next turn (the calls that need it say why they are denied);
    ``swept`` is told each sweep's count (tests)."""
    while True:
        try:
            gone = await store.sweep(clock(), alive)
        except StoreError:
            gone = -1
        if swept is not None:
            swept(gone)
        await trio.sleep(every)


@asynccontextmanager
async def serving(
    store: Store | None,
    *,
    clock: Callable[[], float] = time.time,
    alive: Alive = client_alive,
    every: float = SWEEP_EVERY,
) -> AsyncIterator[None]:
    """For the body's time: ``store`` swept (:func:`keep_swept`) in a task
    of its own, then closed (shielded: a cancelled wrap still closes it). ``None``: nothing.
    An exception of the body comes out as itself (not in an exception group)."""
    if store is None:
        yield
        return
    held: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(keep_swept, store, clock=clock, alive=alive, every=every))
            try:
                yield
            except BaseException as exc:  # raised again below, outside the nursery: as itself
                held = exc
            finally:
                nursery.cancel_scope.cancel()
        if held is not None:
            raise held
    finally:
        held = None
        with trio.CancelScope(shield=True):
            await store.aclose()
