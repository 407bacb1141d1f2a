"""One agent session across the servers of a client (docs/policy.md, "Sessions"): the shared
state of the flow rules, per-tool rate windows and session totals, kept in a store that every
wrap of the session decides in (sans-IO).

The store is a small interface (:class:`Store`): :meth:`Store.begin` opens one write
transaction and hands over the session's totals and the state of one *part* (the flow and rate
trackers of one set of shared rules, named by :func:`part_of`); :meth:`Store.commit` writes what
the decision changed and ends it. A call is decided inside that transaction (read the state,
decide, record the call), so two wraps deciding at the same moment see each other's calls, and a
wrap killed mid-decision leaves the store as it was. The SQLite store of one machine is
:mod:`assay.sessions.sqlite`; a networked store for a gateway on several machines would be
another implementation of the same three methods. :class:`MemoryStore` is the same contract in
memory (one process; tests and library callers).

:class:`SharedSession` is the part of one wrap's decision pipeline that speaks to the store: it
loads the shared state into the wrap's own trackers and counters before the engine judges a call,
and saves them after (:class:`assay.policy.pipeline.Pipeline` calls it). Its state is the
trackers' own state (``export_state``/``restore_state``), so a session shared by N wraps decides
exactly as one wrap would over the merged order of their calls.

Plain code over values: no I/O here (the store does it), and time is the ``now`` given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import msgspec

if TYPE_CHECKING:
    from assay.policy.flows import FlowTracker
    from assay.policy.model import Policy
    from assay.policy.rates import RateTracker
    from assay.policy.state import SessionState

__all__ = [
    "SESSION_STATE",
    "Loaded",
    "MemoryStore",
    "Saved",
    "SessionKey",
    "SharedSession",
    "Store",
    "StoreError",
    "part_of",
    "shares_state",
    "uses_taint",
]

SESSION_STATE = "E_SESSION_STATE"  # the reason code of a call denied because the store failed


class SessionKey(msgspec.Struct, frozen=True, gc=False):
    """Which agent session a wrap belongs to (docs/wrap.md, "Shared sessions").

    ``key`` is the store's key and what records carry: ``client:<pid>:<start>:ns<inode>`` for
    the client process that started the wrap (its pid, its start time, so a reused pid is a new
    session, and its PID namespace; docs/wrap.md, "Session keys") or ``name:<name>`` for a named
    session. ``kind`` is ``client`` or ``named``;
    ``pid``/``start`` are the client's (``None`` for a named session), ``name`` the name
    (``None`` for a client session), ``process`` the client's command name when known."""

    key: str
    kind: str
    pid: int | None = None
    start: str | None = None
    name: str | None = None
    process: str | None = None


class Loaded(NamedTuple):
    """What :meth:`Store.begin` hands over: the part's ``version`` (0 when it has no state
    yet), its ``state`` (``None``: none yet, or reset), and the session's totals."""

    version: int
    state: bytes | None
    requests: int
    tool_calls: int


class Saved(NamedTuple):
    """What :meth:`Store.commit` writes: the part's new ``state`` (``None``: unchanged), the
    session's totals, whether a call went to the server (``entered``: the session's and the
    server's call counts move on), and the ids of the rules armed now (``armed``, for
    ``assay mcp session list``; only read with a new ``state``)."""

    state: bytes | None
    requests: int
    tool_calls: int
    entered: bool
    armed: tuple[str, ...] = ()


class StoreError(Exception):
    """The store cannot be used now: ``cause`` is one line for the user (unreadable, locked past
    the deadline, corrupt, disk full ...). The calls that need the store are denied."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Store(Protocol):
    """The shared state of sessions. One transaction at a time per store object.

    The methods are coroutines (trio): a store does its I/O, and waits for another writer, off
    the event loop (the SQLite store in a worker thread), so a wrap waiting for the store still
    relays every other frame (docs/wrap.md, "Shared sessions"). A cancelled :meth:`begin`
    leaves no transaction open."""

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        """Open one write transaction (waiting for another writer at most the store's deadline)
        and read the session's totals and the state of ``part``. ``server`` is the wrap's
        ``--label``; ``now`` a wall-clock time (seconds since the epoch). Raises
        :class:`StoreError`; then no transaction is open."""

    async def commit(self, saved: Saved, now: float) -> int:
        """Write ``saved`` and end the transaction; the part's version now (the store counts it
        up on every commit that writes a state). Raises :class:`StoreError` (then nothing of
        ``saved`` was written and no transaction is open)."""

    async def abort(self) -> None:
        """End the transaction without writing. Never raises."""


class _Row(msgspec.Struct, gc=False):
    version: int = 0
    state: bytes | None = None


class MemoryStore:
    """:class:`Store` in memory: one process, transactions that never wait. ``fail`` (a cause)
    makes every :meth:`begin` raise, as a broken store would."""

    def __init__(self) -> None:
        self.totals: dict[str, list[int]] = {}  # session key -> [requests, tool_calls, calls]
        self.parts: dict[tuple[str, str], _Row] = {}
        self.servers: dict[tuple[str, str], int] = {}  # (session, server) -> calls
        self.armed: dict[tuple[str, str], tuple[str, ...]] = {}
        self.fail: str | None = None
        self._open: tuple[str, str, str] | None = None

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        return self.begin_blocking(session, part, server, now)

    async def commit(self, saved: Saved, now: float) -> int:
        return self.commit_blocking(saved, now)

    async def abort(self) -> None:
        self.abort_blocking()

    def begin_blocking(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        """:meth:`begin` without an event loop (tests that drive a session by hand)."""
        if self._open is not None:
            raise RuntimeError("MemoryStore: a transaction is already open")
        if self.fail is not None:
            raise StoreError(self.fail)
        self._open = (session.key, part, server)
        totals = self.totals.setdefault(session.key, [0, 0, 0])
        row = self.parts.get((session.key, part)) or _Row()
        return Loaded(row.version, row.state, totals[0], totals[1])

    def commit_blocking(self, saved: Saved, now: float) -> int:
        """:meth:`commit` without an event loop."""
        if self._open is None:
            raise RuntimeError("MemoryStore: no transaction is open")
        key, part, server = self._open
        self._open = None
        totals = self.totals[key]
        totals[0], totals[1] = saved.requests, saved.tool_calls
        row = self.parts.setdefault((key, part), _Row())
        if saved.state is not None:
            row.version += 1
            row.state = saved.state
            self.armed[(key, part)] = saved.armed
        if saved.entered:
            totals[2] += 1
            self.servers[(key, server)] = self.servers.get((key, server), 0) + 1
        return row.version

    def abort_blocking(self) -> None:
        """:meth:`abort` without an event loop."""
        self._open = None

    def reset(self, key: str) -> None:
        """Forget the session's trackers (what ``assay mcp session reset`` does)."""
        for (k, part), row in self.parts.items():
            if k == key:
                row.version += 1
                row.state = None


def uses_taint(policy: Policy) -> bool:
    """Whether ``policy`` keeps a value taint (docs/inspect.md, "Value taint")."""
    inspect = policy.inspect
    return inspect is not None and bool(inspect.any_taint)


def shares_state(policy: Policy) -> bool:
    """Whether ``policy`` has anything a session shares: flow rules, per-tool rate limits or
    session totals. A policy without them never opens the store."""
    limits = policy.limits
    if uses_taint(policy):
        return True
    return bool(policy.sequences) or (
        limits is not None
        and (bool(limits.tools) or limits.max_requests_total is not None or limits.max_tool_calls_total is not None)
    )


def part_of(policy: Policy) -> str:
    """The name of the state ``policy``'s shared rules keep: a digest of its flow rules,
    aliases and per-tool rate limits. Wraps whose policies have the same rules share their
    trackers; the session totals are shared by every wrap of the session whatever its rules."""
    limits = policy.limits
    shape_items: list[Any] = [
        [[repr(r.rule), r.id] for r in policy.sequences],
        sorted([k, list(v)] for k, v in policy.aliases.items()),
        [] if limits is None else [[r.id, list(r.tools), r.max_calls, r.per] for r in limits.tools],
    ]
    if uses_taint(policy):  # only then: the part of a policy without value taint is unchanged
        shape_items.append("value-taint")
    shape = msgspec.json.encode(shape_items)
    return hashlib.sha256(shape).hexdigest()[:32]


class SharedSession:
    """One wrap's side of a shared session: the store, the session key, this wrap's part and
    server, and the trackers and counters the pipeline decides with.

    It does no I/O: the wrap's shell awaits the store (docs/architecture.md, "The shared
    session's store"), and this object is told what it gave. Around each judged call:
    :meth:`loaded` (the store's state into the trackers and counters; a cause string when the
    store failed, then the call is denied and nothing is open), :meth:`saving` (after the call
    went to the server, or was denied: what to write back) and :meth:`committed`, or
    :meth:`aborting`. Requests that are not ``tools/call`` are counted in ``state`` only and reach
    the store with the next judged call (they are never blocked, so they need no decision).
    """

    __slots__ = (
        "store", "key", "part", "server", "flows", "rates", "taint", "state", "clock",
        "_version", "_requests", "_calls", "_open", "problem",
    )

    def __init__(
        self,
        store: Store,
        key: SessionKey,
        part: str,
        server: str,
        state: SessionState,
        flows: FlowTracker | None,
        rates: RateTracker | None,
        clock: Callable[[], float],
        taint: Any = None,
    ) -> None:
        self.store = store
        self.key = key
        self.part = part
        self.server = server
        self.state = state
        self.flows = flows
        self.rates = rates
        # the value taint of the session (docs/inspect.md, "Value taint"): an object with
        # export_state() -> bytes and restore_state(bytes | None); None when the policy has none
        self.taint = taint
        self.clock = clock  # wall clock: the windows of a session are compared across processes
        self._version = -1  # the part's version this wrap's trackers hold (-1: none yet)
        self._requests = 0  # the counters as last saved: what was counted since is this wrap's
        self._calls = 0
        self._open = False
        self.problem: str | None = None  # the store's last failure (None: it works)

    @property
    def open(self) -> bool:
        return self._open

    def loaded(self, got: Loaded | StoreError) -> str | None:
        """What the store's :meth:`Store.begin` gave (the caller awaited it): the shared state
        into the trackers and counters; the failure's cause, or None. After a cause no
        transaction is open (a state that cannot be read ends it: :meth:`aborting` is due, the
        caller's ``abort`` effect)."""
        if isinstance(got, StoreError):
            self.problem = got.cause
            return got.cause
        self._open = True
        state = self.state
        state.requests_count = got.requests + (state.requests_count - self._requests)
        state.tool_calls_count = got.tool_calls + (state.tool_calls_count - self._calls)
        if got.version != self._version:
            try:
                self._restore(got.state)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, IndexError) as exc:
                self.aborting()
                cause = f"the shared session's state could not be read ({exc}); reset it with assay mcp session reset"
                self.problem = cause
                return cause
            self._version = got.version
        self.problem = None
        return None

    def _restore(self, blob: bytes | None) -> None:
        taint = None
        if blob is None:
            flows = rates = None
        else:  # (flows, rates), and the value taint's bytes third when the policy has one
            got = msgspec.msgpack.decode(blob, type=list[Any])
            if len(got) not in (2, 3) or (len(got) == 3 and got[2].__class__ not in (bytes, type(None))):
                raise ValueError("the shared state is not (flows, rates[, taint])")
            flows, rates = got[0], got[1]
            taint = got[2] if len(got) == 3 else None
        if self.flows is not None:
            self.flows.restore_state(flows)
        if self.rates is not None:
            self.rates.restore_state(rates)
        if self.taint is not None:
            self.taint.restore_state(taint)

    def _export(self) -> tuple[bytes | None, tuple[str, ...]]:
        if self.flows is None and self.rates is None and self.taint is None:
            return None, ()
        flows = None if self.flows is None else self.flows.export_state()
        rates = None if self.rates is None else self.rates.export_state()
        armed = () if self.flows is None else self.flows.armed()
        if self.taint is None:
            return msgspec.msgpack.encode((flows, rates)), armed
        return msgspec.msgpack.encode((flows, rates, self.taint.export_state())), armed

    def saving(self, entered: bool, *, save: bool = False) -> Saved:
        """What to commit (``entered``: a call went to the server; ``save``: the trackers
        changed without a call, when a result came back); the transaction is no longer this
        session's to use (the caller commits it and hands the outcome to :meth:`committed`)."""
        self._open = False
        state = self.state
        blob, armed = self._export() if entered or save else (None, ())
        return Saved(blob, state.requests_count, state.tool_calls_count, entered, armed)

    def committed(self, saved: Saved, got: int | StoreError) -> str | None:
        """What the store's :meth:`Store.commit` of ``saved`` gave: the failure's cause, or
        None. After a failure the trackers are read again from the store at the next call (what
        they hold may not have been saved)."""
        if isinstance(got, StoreError):
            self._version = -1
            self.problem = got.cause
            return got.cause
        self._requests, self._calls = saved.requests, saved.tool_calls
        if saved.state is not None:
            self._version = got
        return None

    def aborting(self) -> None:
        """The transaction ends without saving (the caller aborts it); the trackers are read
        again at the next call."""
        self._open = False
        self._version = -1
