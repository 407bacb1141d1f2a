"""A shared session's call in one store round trip (docs/wrap.md, "Shared sessions"), in memory:
once a wrap's transaction was saved, its next call is decided on what that transaction left and
written with the store's ``attempt``, which writes only if no other wrap wrote meanwhile. When
one did (a call of another wrap, a reset), the store hands over the fresh state with its
transaction open and the call is decided again on it: a flow rule armed by another wrap denies
the send, totals count every call of every wrap once, and a reset lets calls through again.
Over any interleaving of two wraps' store trips the session decides as one wrap would over the
order of its writes."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import trio
from hypothesis import event, given, settings, strategies as st

from assay.policy import load_policy
from assay.policy.storeapi import Loaded, MemoryStore, Saved, SessionKey
from assay.session.admission import admit
from assay.session.effects import AdmitLine, StoreAbort, StoreAttempt, StoreBegin, StoreCommit, ToClient, ToServer
from assay.session.session import SessionOptions, WrapSession

from tests.wrap._harness import Harness

KEY = SessionKey("name:agent", "named", name="agent")
FLOWS = load_policy(
    b'version: "2.0"\n'
    b'tools:\n  allow: ["*"]\n'
    b"sequences:\n"
    b'  - { type: never_after, id: no-exfil, trigger: "read_*", forbidden: { tool: fetch, args_match: { url: "^http" } } }\n'
)
TOTALS = load_policy(b'version: "2.0"\ntools:\n  allow: ["*"]\nlimits:\n  max_tool_calls_total: 3\n')
BOTH = load_policy(
    b'version: "2.0"\n'
    b'tools:\n  allow: ["*"]\n'
    b"limits:\n  max_tool_calls_total: 5\n"
    b"sequences:\n"
    b'  - { type: never_after, id: no-exfil, trigger: "read_*", forbidden: { tool: fetch, args_match: { url: "^http" } } }\n'
)


class Counting(MemoryStore):
    """A MemoryStore that counts its round trips (``begin``, ``commit``, ``attempt``: what a
    networked store would send) and the attempts that found another wrap's write."""

    def __init__(self) -> None:
        super().__init__()
        self.trips = 0
        self.conflicts = 0
        self._inner = False

    def twin(self) -> Counting:
        other = Counting()
        other.totals, other.parts, other.servers, other.armed, other.known = (
            self.totals,
            self.parts,
            self.servers,
            self.armed,
            self.known,
        )
        return other

    def begin_blocking(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        self.trips += not self._inner
        return super().begin_blocking(session, part, server, now)

    def commit_blocking(self, saved: Saved, now: float) -> int:
        self.trips += not self._inner
        return super().commit_blocking(saved, now)

    def attempt_blocking(self, *args: Any) -> int | Loaded:
        self.trips += 1
        self._inner = True
        try:
            got = super().attempt_blocking(*args)
        finally:
            self._inner = False
        self.conflicts += isinstance(got, Loaded)
        return got


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def frame(rid: int, name: str, arguments: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


def wrap(policy, label: str, store: MemoryStore, clock: Clock) -> Harness:
    return Harness(policy, SessionOptions(label=label), shared=(store, KEY), wall_clock=clock)


def code(outcome) -> str:
    return json.loads(outcome.reply)["result"]["structuredContent"]["error_code"]


def test_an_uncontended_call_takes_one_round_trip() -> None:
    store = Counting()
    fs = wrap(BOTH, "fs", store, Clock())
    assert fs.handle(frame(1, "list_dir")).disposition == "forwarded"
    assert store.trips == 2  # the first call: begin, commit (nothing known yet)
    for rid in range(2, 6):
        assert fs.handle(frame(rid, "list_dir")).disposition == "forwarded"
    assert store.trips == 2 + 4 and store.conflicts == 0  # then one attempt each
    assert fs.handle(frame(6, "list_dir")).disposition == "blocked"  # the sixth: max_tool_calls_total
    assert store.totals[KEY.key][1:] == [6, 5]  # six counted, five went to the server


def test_a_flow_rule_armed_by_another_wrap_meanwhile_denies_the_send() -> None:
    """The web wrap's cache says nothing is armed; the store says the filesystem wrap read a
    secret since: its attempt writes nothing, and the send is decided again and denied."""
    store, clock = Counting(), Clock()
    fs, web = wrap(FLOWS, "fs", store, clock), wrap(FLOWS, "web", store, clock)
    assert web.handle(frame(1, "fetch", {"url": "ftp://mirror/x"})).disposition == "forwarded"
    assert fs.handle(frame(1, "read_text_file", {"path": "/ws/secrets/token.env"})).disposition == "forwarded"
    trips = store.trips
    sent = web.handle(frame(2, "fetch", {"url": "http://127.0.0.1:9/exfil"}))
    assert sent.disposition == "blocked" and code(sent) == "E_SEQUENCE_VIOLATION"
    assert (store.trips - trips, store.conflicts) == (2, 1)  # the attempt, then the commit of the deny
    assert store.totals[KEY.key][1:] == [3, 2]  # each call counted once; the deny did not go
    # the web wrap now holds the fresh state: its next call is one trip again
    trips = store.trips
    assert web.handle(frame(3, "fetch", {"url": "http://127.0.0.1:9/again"})).disposition == "blocked"
    assert (store.trips - trips, store.conflicts) == (1, 1)


def test_two_wraps_alternating_count_every_call_once() -> None:
    store, clock = Counting(), Clock()
    a, b = wrap(TOTALS, "a", store, clock), wrap(TOTALS, "b", store, clock)
    got = [w.handle(frame(rid, "x")).disposition for rid in (1, 2, 3) for w in (a, b)]
    assert got == ["forwarded"] * 3 + ["blocked"] * 3
    assert store.totals[KEY.key][1:] == [6, 3]
    assert store.conflicts == 4  # each wrap's second and third call found the other's write


def test_a_reset_between_calls_is_seen_by_the_next_attempt() -> None:
    store, clock = Counting(), Clock()
    fs = wrap(FLOWS, "fs", store, clock)
    assert fs.handle(frame(1, "read_text_file", {"path": "/s"})).disposition == "forwarded"
    assert fs.handle(frame(2, "fetch", {"url": "http://x"})).disposition == "blocked"
    assert trio.run(store.reset, KEY.key, "cli", clock.now) is True  # assay mcp session reset
    trips = store.trips
    assert fs.handle(frame(3, "fetch", {"url": "http://x"})).disposition == "forwarded"
    assert (store.trips - trips, store.conflicts) == (2, 1)
    assert store.totals[KEY.key][1] == 1  # counted from the reset on


def test_a_store_that_fails_at_the_attempt_denies_the_call_and_counts_nothing() -> None:
    store, clock = Counting(), Clock()
    fs = wrap(TOTALS, "fs", store, clock)
    assert fs.handle(frame(1, "x")).disposition == "forwarded"
    store.fail = "disk full"
    failed = fs.handle(frame(2, "x"))
    assert failed.disposition == "blocked" and code(failed) == "E_SESSION_STATE"
    assert store.totals[KEY.key][1:] == [1, 1]
    store.fail = None
    trips = store.trips
    assert fs.handle(frame(3, "x")).disposition == "forwarded"
    assert store.trips - trips == 2  # after a failure the state is read again: begin, commit
    assert store.totals[KEY.key][1:] == [2, 2]  # the denied call was not counted later either


def test_calls_denied_while_the_store_failed_are_not_counted_once_it_is_back() -> None:
    """A call the store could not judge (its transaction failed to open, or its write failed)
    is denied and never counted: once the store is back the session's total is what it was, so
    the calls are judged again on it, not refused for the calls made during the outage."""
    store, clock = Counting(), Clock()
    fs = wrap(TOTALS, "fs", store, clock)
    assert fs.handle(frame(1, "x")).disposition == "forwarded"
    store.fail = "the database is down"
    for rid in range(2, 12):  # the first fails at the attempt, the rest at the begin
        failed = fs.handle(frame(rid, "x"))
        assert failed.disposition == "blocked" and code(failed) == "E_SESSION_STATE"
    store.fail = None
    got = [fs.handle(frame(rid, "x")).disposition for rid in range(12, 15)]
    assert got == ["forwarded", "forwarded", "blocked"]  # max_tool_calls_total: 3
    assert store.totals[KEY.key][1:] == [4, 3]  # the three allowed and the one denied by the total


# -- any interleaving of two wraps' store trips ------------------------------------------------


class Stepped:
    """A wrap whose store trips wait until the test performs them (:meth:`step`); the lock of
    the store is modelled: a begin or attempt is possible only while no other wrap holds a
    transaction open. ``order`` (shared by the wraps) gets (wrap, id, went to the server) of
    each call as it is decided for good: the order of the store's writes."""

    def __init__(self, index: int, store: Counting, clock: Clock, order: list[tuple[int, int, bool]]) -> None:
        self.index = index
        self.session = WrapSession(
            BOTH, SessionOptions(label=f"w{index}"), clock=clock, shared=(store, KEY), wall_clock=clock
        )
        self.store = store
        self.pending: deque[Any] = deque()
        self.order = order

    def feed(self, effects: list[Any]) -> None:
        todo = deque(effects)
        while todo:
            effect = todo.popleft()
            if isinstance(effect, AdmitLine):
                todo.extendleft(reversed(self.session.admitted(admit(effect.line))))
            elif isinstance(effect, StoreAttempt | StoreBegin | StoreCommit | StoreAbort):
                self.pending.append(effect)
            elif isinstance(effect, ToServer | ToClient):
                for line in effect.data.splitlines():
                    message = json.loads(line)
                    if isinstance(effect, ToServer) and message.get("method") == "tools/call":
                        self.order.append((self.index, message["id"], True))
                    elif isinstance(effect, ToClient) and "result" in message:
                        self.order.append((self.index, message["id"], False))

    def can_step(self, wraps: list[Stepped]) -> bool:
        if not self.pending:
            return False
        if isinstance(self.pending[0], StoreCommit | StoreAbort):
            return True
        return all(w.store._open is None for w in wraps if w is not self)

    def step(self) -> None:
        effect = self.pending.popleft()
        store = self.store
        if isinstance(effect, StoreAbort):
            store.abort_blocking()
        elif isinstance(effect, StoreAttempt):
            got = store.attempt_blocking(
                effect.key, effect.part, effect.server, effect.expect, effect.saved, effect.now
            )
            self.feed(self.session.store_attempted(got))
        elif isinstance(effect, StoreBegin):
            self.feed(
                self.session.store_begun(store.begin_blocking(effect.key, effect.part, effect.server, effect.now))
            )
        else:
            self.feed(self.session.store_committed(store.commit_blocking(effect.saved, effect.now)))


def _args(name: str) -> dict:
    return {"url": "http://x"} if name == "fetch" else {"path": "/s"}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["call"] * 3 + ["step"] * 4 + ["ping", "cancel"]),
            st.integers(0, 1),
            st.sampled_from(["read_file", "fetch", "list_dir"]),
        ),
        max_size=60,
    )
)
def test_two_wraps_decide_as_one_wrap_over_the_order_of_their_writes(script) -> None:
    """Calls of two wraps with their store trips interleaved every way, and cancelled by the
    client at any point: every call is answered once (or dropped, cancelled), counted once in
    the totals, and decided as one wrap alone would decide the calls in
    the order the store wrote them (the flow rule and max_tool_calls_total included)."""
    first, clock = Counting(), Clock()
    order: list[tuple[int, int, bool]] = []
    wraps = [Stepped(0, first, clock, order), Stepped(1, first.twin(), clock, order)]
    names: dict[tuple[int, int], str] = {}
    sent = [0, 0]
    cancelled: set[tuple[int, int]] = set()
    for action, which, name in script:
        w = wraps[which]
        clock.now += 0.001
        if action == "call":
            sent[which] += 1
            names[(which, sent[which])] = name
            w.feed(w.session.receive_client_data(json.dumps(frame(sent[which], name, _args(name))).encode() + b"\n"))
        elif action == "cancel":  # the wrap's last call (it may wait, be in a trip, or be done)
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": sent[which]}}
            w.feed(w.session.receive_client_data(json.dumps(note).encode() + b"\n"))
            cancelled.add((which, sent[which]))
        elif action == "ping":
            w.feed(w.session.receive_client_data(b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n'))
        elif w.can_step(wraps):
            w.step()
    while any(w.pending for w in wraps):  # the rest, in turn
        for w in wraps:
            if w.can_step(wraps):
                w.step()
    # every call answered once, or dropped when the client cancelled it before the store wrote it
    for which in (0, 1):
        answered = [rid for w, rid, _went in order if w == which]
        assert len(answered) == len(set(answered))
        assert {(which, rid) for rid in range(1, sent[which] + 1) if rid not in answered} <= cancelled
    if order:
        _requests, tool_calls, went = first.totals[KEY.key]
        assert tool_calls == len(order)  # every call counted once
        assert went == sum(went for _w, _rid, went in order)  # and the ones that went, once
    event(f"attempts that found another write: {min(wraps[0].store.conflicts + wraps[1].store.conflicts, 3)}+")
    event(f"calls dropped: {min(sent[0] + sent[1] - len(order), 2)}+")
    alone = Harness(BOTH, SessionOptions(label="alone"))
    replay = []
    for seq, (which, rid, _went) in enumerate(order, 1):
        name = names[(which, rid)]
        replay.append(alone.handle(frame(seq, name, _args(name))).disposition == "forwarded")
    assert replay == [went for _w, _rid, went in order]


def test_a_call_decided_again_records_its_argument_findings_once() -> None:
    from assay.session.effects import Sink

    flagging = load_policy(
        b'version: "2.0"\ntools: {allow: ["*"]}\nenforcement: {unconstrained_tools: allow}\n'
        b"limits: {max_tool_calls_total: 10}\ninspect: {arguments: {secrets: flag}}\n"
    )
    store, clock = Counting(), Clock()
    a, b = (
        Harness(
            flagging,
            SessionOptions(decision_sinks=(Sink.DECISION_LOG,), event_source="assay://t", label=label),
            shared=(store, KEY),
            wall_clock=clock,
        )
        for label in ("a", "b")
    )
    assert a.handle(frame(1, "x")).disposition == "forwarded"
    assert b.handle(frame(1, "x")).disposition == "forwarded"
    out = a.handle(frame(2, "send", {"body": "here: ghp_" + "Ab3" * 12}))
    assert out.disposition == "forwarded" and store.conflicts == 1
    events = [json.loads(r) for r in out.effects.records(Sink.DECISION_LOG)]
    flagged = [e["data"] for e in events if e["type"] == "assay.response.inspected"]
    assert len(flagged) == 1 and flagged[0]["findings"][0]["pointer"] == "/body"
