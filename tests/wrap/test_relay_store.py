"""The shared session's store as the relay awaits it (docs/wrap.md, "Shared sessions"), in
memory: a real WrapSession and Relay, an in-memory child, and a store that takes time and waits
for a lock like a networked one would (``SlowStore``: the :class:`assay.policy.storeapi.Store`
interface, one more class). While a call waits for the store, every other frame flows both ways;
the calls of the wrap queue behind it in order; a cancelled waiting call is never sent nor
counted; the client's end waits for it; a failing store denies it."""

from __future__ import annotations

import json

import trio
import trio.testing

from assay.policy import load_policy
from assay.policy.storeapi import Expect, Loaded, MemoryStore, Saved, SessionKey, StoreError
from assay.session.effects import Sink
from assay.shells.stdio.relay import Relay, RunResult
from assay.session.session import SessionOptions, WrapSession

from tests.wrap.test_relay_memory import MemoryChild

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\nlimits:\n  max_tool_calls_total: 10\n')
KEY = SessionKey("name:agent", "named", name="agent")


class SlowStore(MemoryStore):
    """A store with latency (``latency`` seconds in each begin, commit and attempt) and another
    writer's lock (``writer``: while the test holds it, begin and attempt wait)."""

    def __init__(self, latency: float = 0.01) -> None:
        super().__init__()
        self.latency = latency
        self.writer = trio.Lock()
        self.begun = 0
        self.conflicts = 0  # attempts that found another writer's write

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        async with self.writer:
            await trio.sleep(self.latency)
            self.begun += 1
            return self.begin_blocking(session, part, server, now)

    async def commit(self, saved: Saved, now: float) -> int:
        await trio.sleep(self.latency)
        return self.commit_blocking(saved, now)

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        async with self.writer:
            await trio.sleep(self.latency)
            self.begun += 1
            got = self.attempt_blocking(session, part, server, expect, saved, now)
            self.conflicts += isinstance(got, Loaded)
            return got


def frame(rid: int | None, method: str, **params: object) -> bytes:
    message: dict = {"jsonrpc": "2.0", "method": method, "params": params}
    if rid is not None:
        message["id"] = rid
    return json.dumps(message).encode() + b"\n"


def call(rid: int, name: str = "work") -> bytes:
    return frame(rid, "tools/call", name=name, arguments={"n": rid})


class Run:
    def __init__(self, store: SlowStore) -> None:
        options = SessionOptions(
            decision_sinks=(Sink.DECISION_LOG,), shutdown_grace=5.0, label="a", shared_session_key=KEY.key
        )
        self.store = store
        self.session = WrapSession(POLICY, options, clock=trio.current_time, shared=(store, KEY))
        self.child = MemoryChild()
        self.log = bytearray()
        self.to_wrap, client_in = trio.testing.memory_stream_one_way_pair()
        client_out, self.from_wrap = trio.testing.memory_stream_one_way_pair()
        self.warnings: list[str] = []
        sink = type("Sink", (), {"write": lambda s, d: self.log.extend(d), "close": lambda s: None})()
        self.relay = Relay(
            [],
            self.session,
            client_in=client_in,
            client_out=client_out,
            sinks={Sink.DECISION_LOG: sink},
            warn=self.warnings.append,
            handle_signals=False,
            child=self.child,
        )
        self.received: list[dict] = []
        self._buffer = b""
        self.result: RunResult | None = None

    async def start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.child.serve)

        async def run() -> None:
            self.result = await self.relay.run()

        nursery.start_soon(run)

    async def answer(self, rid: int) -> dict:
        while True:
            for message in self.received:
                if message.get("id") == rid:
                    return message
            data = await self.from_wrap.receive_some(65536)
            assert data, "the client's stream ended"
            self._buffer += data
            *lines, self._buffer = self._buffer.split(b"\n")
            self.received.extend(json.loads(line) for line in lines if line)

    def seen(self) -> list[object]:
        return [m.get("id") if "id" in m else m["method"] for m in self.child.seen]


async def test_a_call_waiting_for_the_store_lets_every_other_frame_flow_and_calls_keep_their_order():
    store = SlowStore()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(call(1))
        assert "isError" not in (await run.answer(1))["result"]  # the store works
        await store.writer.acquire()  # another writer holds the store
        await run.to_wrap.send_all(
            call(2)
            + frame(3, "ping")
            + call(4)
            + frame(5, "ping")
            + frame(None, "notifications/progress", progressToken=1)
        )
        assert (await run.answer(3))["result"]["method"] == "ping"
        assert (await run.answer(5))["result"]["method"] == "ping"
        assert run.seen() == [1, 3, 5, "notifications/progress"]  # the calls wait, in order
        store.writer.release()
        await run.answer(2)
        await run.answer(4)
        assert run.seen() == [1, 3, 5, "notifications/progress", 2, 4]
        assert store.totals[KEY.key][1] == 3  # three calls counted, each once
        # the requests after a waiting call count after it: 1, then 2 (pings 3 and 5 after 2 and 4)
        assert store.totals[KEY.key][0] in (4, 6)
        await run.to_wrap.aclose()
    assert run.result is not None and run.result.exit_code == 0


async def test_a_cancelled_waiting_call_is_never_sent_nor_counted():
    store = SlowStore()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await store.writer.acquire()
        cancel = frame(None, "notifications/cancelled", requestId=1, reason="user")
        await run.to_wrap.send_all(call(1) + call(2) + cancel + frame(3, "ping"))
        await run.answer(3)
        store.writer.release()
        await run.answer(2)
        assert run.seen() == [3, 2]  # neither call 1 nor its cancellation reached the server
        assert store.totals[KEY.key][1] == 1
        assert len(bytes(run.log).splitlines()) == 1  # one decision recorded: call 2's
        await run.to_wrap.aclose()
    assert run.result is not None and run.result.exit_code == 0


def _other_wrap_calls(store: SlowStore) -> None:
    """Another wrap of the session (another part, another server) saves one call."""
    other = store.twin()
    loaded = other.begin_blocking(KEY, "another part", "b", 0.0)
    other.commit_blocking(Saved(b"x", loaded.requests + 1, loaded.tool_calls + 1, True), 0.0)


async def test_a_call_cancelled_while_its_attempt_finds_another_write_is_never_sent_nor_counted():
    """The call was decided on the cached state and sent to the store; the client cancels it
    while the store waits for another writer, who writes: the store writes nothing of the call,
    and instead of being decided again it is dropped, its cancellation consumed."""
    store = SlowStore()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(call(1))
        await run.answer(1)  # saved: the next call is one attempt
        await store.writer.acquire()
        cancel = frame(None, "notifications/cancelled", requestId=2, reason="user")
        await run.to_wrap.send_all(call(2) + cancel + frame(3, "ping"))
        await run.answer(3)
        _other_wrap_calls(store)
        store.writer.release()
        await run.to_wrap.send_all(call(4))
        await run.answer(4)
        assert run.seen() == [1, 3, 4]  # neither call 2 nor its cancellation reached the server
        assert store.conflicts == 1
        assert store.totals[KEY.key][1] == 3  # 1, the other wrap's, 4
        assert len(bytes(run.log).splitlines()) == 2  # calls 1 and 4 recorded, not 2
        await run.to_wrap.aclose()
    assert run.result is not None and run.result.exit_code == 0


async def test_a_transaction_ended_without_a_commit_never_counts_another_wraps_calls_twice():
    """A call cancelled while its begin waits for another writer, who writes: the transaction
    is aborted, and the next call counts the other wrap's call once."""
    store = SlowStore()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await store.writer.acquire()
        cancel = frame(None, "notifications/cancelled", requestId=1, reason="user")
        await run.to_wrap.send_all(call(1) + cancel + frame(2, "ping"))
        await run.answer(2)
        _other_wrap_calls(store)
        store.writer.release()
        await run.to_wrap.send_all(call(3))
        await run.answer(3)
        assert run.seen() == [2, 3]
        assert store.totals[KEY.key][1] == 2  # the other wrap's call and call 3
        await run.to_wrap.aclose()


async def test_a_call_cancelled_while_its_attempt_is_written_goes_with_its_cancellation():
    """The store wrote the call (nobody else wrote): it was counted, so it goes to the server,
    and the client's cancellation follows it."""
    store = SlowStore()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(call(1))
        await run.answer(1)
        await store.writer.acquire()
        cancel = frame(None, "notifications/cancelled", requestId=2, reason="user")
        await run.to_wrap.send_all(call(2) + cancel + frame(3, "ping"))
        await run.answer(3)
        store.writer.release()
        await run.answer(2)
        assert run.seen() == [1, 3, 2, "notifications/cancelled"]
        assert (store.conflicts, store.totals[KEY.key][1]) == (0, 2)
        await run.to_wrap.aclose()
    assert run.result is not None and run.result.exit_code == 0


async def test_the_clients_end_waits_for_the_call_that_waits_for_the_store():
    store = SlowStore()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await store.writer.acquire()
        await run.to_wrap.send_all(call(1))
        await run.to_wrap.aclose()  # the client's end while its call waits
        await trio.testing.wait_all_tasks_blocked()
        assert run.seen() == []
        store.writer.release()
        assert "isError" not in (await run.answer(1))["result"]  # sent, answered, then the end
    assert run.seen() == [1]
    assert store.totals[KEY.key][1] == 1
    assert run.result is not None and run.result.exit_code == 0 and run.result.stop_cause == "client_eof"


async def test_a_failing_store_denies_the_waiting_call_and_the_rest_flows():
    store = SlowStore()
    store.fail = "the network store is unreachable"
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(call(1) + frame(2, "ping"))
        denied = (await run.answer(1))["result"]
        assert denied["isError"] and denied["structuredContent"]["error_code"] == "E_SESSION_STATE"
        await run.answer(2)
        assert run.seen() == [2]
        await run.to_wrap.aclose()
    assert [w for w in run.warnings if "unreachable" in w] == [
        "assay: shared session: the network store is unreachable; calls are denied (E_SESSION_STATE)"
    ]


async def test_a_commit_that_fails_denies_the_call_it_was_saving():
    class FailingCommit(SlowStore):
        async def commit(self, saved: Saved, now: float) -> int:
            self.abort_blocking()
            raise StoreError("disk full")

    store = FailingCommit()
    run = Run(store)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(call(1))
        denied = (await run.answer(1))["result"]
        assert denied["structuredContent"]["error_code"] == "E_SESSION_STATE"
        assert run.seen() == []
        await run.to_wrap.aclose()


async def test_calls_waiting_for_the_store_are_bounded_in_bytes_then_all_go():
    # a client that floods calls while another writer holds the store: wrap stops reading it past
    # the client queue's bound (docs/wrap.md, "Shared sessions"), and every call goes once the
    # store is free, each answered once
    from assay.shells.stdio.relay import REPLY_QUEUE_LIMIT

    store = SlowStore(latency=0)
    run = Run(store)
    big = "x" * (64 << 10)
    count = (REPLY_QUEUE_LIMIT // len(big)) * 3 // 2  # half again the bound
    flood = b"".join(frame(i, "tools/call", name="work", arguments={"p": big}) for i in range(1, count + 1))
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await store.writer.acquire()
        await run.to_wrap.send_all(flood)
        await trio.testing.wait_all_tasks_blocked()
        held = run.session.held_bytes
        assert REPLY_QUEUE_LIMIT <= held <= REPLY_QUEUE_LIMIT + (1 << 20)  # it stopped reading
        assert run.seen() == []
        store.writer.release()
        answered = [await run.answer(i) for i in range(1, count + 1)]
        assert len(answered) == count
        assert run.seen() == list(range(1, 11))  # max_tool_calls_total: 10, the rest denied
        assert run.session.held_bytes == 0
        await run.to_wrap.aclose()
    assert run.result is not None and run.result.exit_code == 0
