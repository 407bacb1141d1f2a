"""The gateway's links take turns at the session store (assay/serve/turns.py; docs/serve.md,
"Upstreams and the agent session of a user"): a second link's begin waits on a trio lock until
the first link's transaction ends, however it ends."""

from __future__ import annotations

import pytest
import trio

from assay.policy.storeapi import Expect, Loaded, MemoryStore, Saved, SessionKey, StoreError
from assay.serve.turns import Turns, TurnStore

KEY = SessionKey(key="user:i#alice", kind="user", name="alice")


@pytest.mark.parametrize("end", ["commit", "abort", "aclose"])
async def test_a_second_begin_waits_for_the_first_transaction_to_end(end):
    store = MemoryStore()
    turns = Turns()
    a, b = TurnStore(store.twin(), turns), TurnStore(store.twin(), turns)
    await a.begin(KEY, "p", "files", 1.0)
    began = trio.Event()

    async def second() -> None:
        await b.begin(KEY, "p", "web", 2.0)
        began.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        assert not began.is_set()  # waiting on the turn, not in the store
        if end == "commit":
            await a.commit(Saved(state=None, requests=1, tool_calls=1, entered=True), 1.5)
        else:
            await getattr(a, end)()
        await began.wait()
    await b.abort()
    assert not turns.locked()


async def test_a_failed_or_cancelled_begin_gives_the_turn_back():
    class Failing(MemoryStore):
        async def begin(self, *args, **kwargs):  # type: ignore[override]
            raise StoreError("locked past the deadline")

    turns = Turns()
    with pytest.raises(StoreError):
        await TurnStore(Failing(), turns).begin(KEY, "p", "files", 1.0)
    assert not turns.locked()
    store = MemoryStore()
    holder = TurnStore(store.twin(), turns)
    await holder.begin(KEY, "p", "files", 1.0)
    with trio.move_on_after(0.01):
        await TurnStore(store.twin(), turns).begin(KEY, "p", "web", 1.0)  # cancelled while waiting
    await holder.abort()
    assert not turns.locked()


async def test_an_attempt_holds_the_turn_only_while_its_transaction_stays_open():
    """An attempt that wrote ends its transaction (the turn is given back); one that met another
    link's write hands over the fresh state with the transaction open, and holds the turn until
    its commit."""
    store = MemoryStore()
    turns = Turns()
    a, b = TurnStore(store.twin(), turns), TurnStore(store.twin(), turns)
    await a.begin(KEY, "p", "files", 1.0)
    version = await a.commit(Saved(state=b"s", requests=1, tool_calls=1, entered=True), 1.0)
    got = await a.attempt(KEY, "p", "files", Expect(version, 1, 1), Saved(b"t", 2, 2, True), 2.0)
    assert got == version + 1 and not turns.locked()
    await b.begin(KEY, "p", "web", 3.0)
    await b.commit(Saved(state=b"u", requests=3, tool_calls=3, entered=True), 3.0)
    got = await a.attempt(KEY, "p", "files", Expect(version + 1, 2, 2), Saved(b"v", 3, 3, True), 4.0)
    assert isinstance(got, Loaded) and got.state == b"u" and turns.locked()
    await a.commit(Saved(state=b"w", requests=4, tool_calls=4, entered=True), 4.0)
    assert not turns.locked()
