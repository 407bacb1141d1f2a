"""One agent session across the servers of a client (docs/policy.md, "Sessions"): the shared
state of the flow rules, per-tool rate windows and session totals, kept in a store that every
wrap of the session decides in (sans-IO).

The store is a small interface (:class:`Store`): :meth:`Store.begin` opens one write
transaction and hands over the session's totals and the state of one *part* (the flow and rate
trackers of one set of shared rules, named by :func:`part_of`); :meth:`Store.commit` writes what
the decision changed and ends it. A call is decided inside that transaction (read the state,
decide, record the call), so two wraps deciding at the same moment see each other's calls, and a
wrap killed mid-decision leaves the store as it was. The SQLite store of one machine is
:mod:`assay.store.sqlite`; a networked store for a gateway on several machines would be
another implementation of the same interface. Besides the transaction, the interface lists the
sessions (:meth:`Store.sessions`, what ``assay mcp session list`` shows, as :class:`SessionRow`),
resets one (:meth:`Store.reset`), forgets the expired ones (:meth:`Store.sweep`, with the caller's
liveness of a client, :data:`Alive`) and closes (:meth:`Store.aclose`); every method is a
coroutine, and the wrap and the CLI use nothing else of a store. :class:`MemoryStore` is the same contract in
memory (one process; tests and library callers).

:class:`SharedSession` is the part of one wrap's decision pipeline that speaks to the store: it
loads the shared state into the wrap's own trackers and counters before the engine judges a call,
and saves them after (:class:`assay.policy.pipeline.Pipeline` calls it). Its state is the
trackers' own state, so a session shared by N wraps decides exactly as one wrap would over the
merged order of their calls. What is shared is what the guards declare (:mod:`assay.policy.guards`:
each stateful guard's :class:`~assay.policy.guards.Part`, a codec under the guard's stable name):
the stored state is a msgpack map from those names to their values. A wrap keeps the entries of
guards it does not have as it read them, so wraps with different guards over the same part lose
nothing of each other's. A state written before this layout (the array ``[flows, rates]`` or
``[flows, rates, taint]``) is still read, by position.

Plain code over values: no I/O here (the store does it), and time is the ``now`` given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

import msgspec

if TYPE_CHECKING:
    from assay.policy.model import Policy
    from assay.policy.state import SessionState

__all__ = [
    "NAMED_IDLE",
    "SESSION_STATE",
    "Alive",
    "Loaded",
    "MemoryStore",
    "Part",
    "Saved",
    "ServerRow",
    "SessionKey",
    "SessionRow",
    "SharedSession",
    "Store",
    "StoreError",
    "expired",
    "part_of",
    "shares_state",
    "uses_taint",
]

SESSION_STATE = "E_SESSION_STATE"  # the reason code of a call denied because the store failed
NAMED_IDLE = 7 * 86400.0  # a session without a call for 7 days whose liveness no one can tell is forgotten

# the names of the entries of a state stored as an array (the layout before the guards declared
# their state): position i is the state of the guard named _OLD_LAYOUT[i]
_OLD_LAYOUT = ("flows", "rates", "taint")


class Part(NamedTuple):
    """The shared state one guard keeps (docs/wrap.md, "Shared sessions"): ``export`` gives it
    as a msgpack-able value, ``restore`` takes such a value (or ``None``: the fresh state) and
    raises ValueError or TypeError when it does not fit; ``armed`` (optional) the ids of the
    rules under way, for ``assay mcp session list``. ``name`` is the guard's ``NAME`` (:mod:`assay.policy.guards`)."""

    name: str
    export: Callable[[], Any]
    restore: Callable[[Any], None]
    armed: Callable[[], tuple[str, ...]] | None = None


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


Alive: TypeAlias = "Callable[[SessionKey], bool | None]"
"""Whether a client session's process still runs: True, False, or None when the caller cannot
tell (the key names a PID namespace it cannot see). :func:`assay.store.keys.client_alive`
is the wrap's and the CLI's."""


class ServerRow(msgspec.Struct, frozen=True, gc=False):
    """One server of a session in :class:`SessionRow`: its ``--label``, the calls that went to it,
    its last activity (seconds since the epoch) and the pid of its last wrap (None: unknown)."""

    server: str
    calls: int
    last: float
    pid: int | None = None


class SessionRow(msgspec.Struct, frozen=True, gc=False):
    """One session as ``assay mcp session list`` shows it (docs/wrap.md, "``assay mcp session
    list`` and ``reset``"); ``--json`` prints its fields in this order. ``alive`` is the store's
    checker's answer (None: cannot tell; a named session is alive),
    ``servers`` by label, ``calls`` the calls that went to a server, ``requests``/``tool_calls``
    the session's totals, ``armed`` the flow rules armed now in any part (sorted), ``created``
    and ``last`` seconds since the epoch."""

    key: str
    kind: str
    pid: int | None
    process: str | None
    name: str | None
    alive: bool | None
    servers: list[ServerRow]
    calls: int
    requests: int
    tool_calls: int
    armed: list[str]
    created: float
    last: float


def expired(session: SessionKey, last: float, now: float, alive: Alive) -> bool:
    """Whether a sweep at ``now`` forgets ``session``, last used at ``last``: a client session
    when ``alive`` says its client is gone, a named session idle for more than
    :data:`NAMED_IDLE`, and a client session ``alive`` cannot tell about (None: its PID namespace
    is not this process's) idle as long. A sweep never forgets a session for a client it
    cannot see."""
    if session.kind == "client":
        state = alive(session)
        return state is False or (state is None and now - last > NAMED_IDLE)
    return now - last > NAMED_IDLE


class Store(Protocol):
    """The shared state of sessions (docs/architecture.md, "The Store interface"). One
    transaction at a time per store object; :meth:`sessions`, :meth:`reset` and :meth:`sweep`
    are transactions of their own and may run while this object's transaction is open (a
    store never answers them from inside it).

    The methods are coroutines (trio): a store does its I/O, and waits for another writer, off
    the event loop (the SQLite store in a worker thread), so a wrap waiting for the store still
    relays every other frame (docs/wrap.md, "Shared sessions"). A cancelled :meth:`begin`
    leaves no transaction open."""

    @property
    def where(self) -> str:
        """Where the sessions are, for messages: the database file, a URL."""
        ...

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

    async def sessions(self, now: float) -> list[SessionRow]:
        """Every session, the most recent activity first (then by key). ``now`` is the
        caller's wall clock. Reading a store that does not exist yet creates nothing. Raises
        :class:`StoreError`."""
        ...

    async def reset(self, key: str, who: str, now: float) -> bool:
        """Forget session ``key``'s trackers (every part's state to none, its version moving on
        so every wrap reads it again) and its totals, in one transaction, and keep a ``reset``
        event naming ``who`` at ``now``. False when there is no such session (then nothing is
        created). Raises :class:`StoreError`."""
        ...

    async def sweep(self, now: float, alive: Alive) -> int:
        """Forget the sessions :func:`expired` at ``now`` (each with its parts, servers and
        events), in one transaction; how many. Creates nothing. Raises :class:`StoreError`."""
        ...

    async def aclose(self) -> None:
        """Let go of the store's resources (an open transaction is aborted). Idempotent, never
        raises; a later :meth:`begin` opens the store again."""
        ...


class _Row(msgspec.Struct, gc=False):
    version: int = 0
    state: bytes | None = None


class _Session(msgspec.Struct, gc=False):
    """What :meth:`MemoryStore.sessions` shows of a session besides its counters."""

    key: SessionKey
    created: float
    last: float
    server_last: dict[str, float] = msgspec.field(default_factory=dict)
    events: list[tuple[float, str, str]] = msgspec.field(default_factory=list)  # (time, kind, detail)


def _cannot_tell(session: SessionKey) -> bool | None:
    return None if session.kind == "client" else True


EVENTS_KEPT = 1000  # the newest events kept per session


class MemoryStore:
    """:class:`Store` in memory: one process, transactions that never wait. ``fail`` (a cause)
    makes every :meth:`begin` raise, as a broken store would. ``alive`` fills
    :attr:`SessionRow.alive` (by default: a client cannot be told about). :meth:`twin` is
    another store object on the same sessions, as a second process would open the same
    database."""

    where = "memory"

    def __init__(self, alive: Alive = _cannot_tell) -> None:
        self.totals: dict[str, list[int]] = {}  # session key -> [requests, tool_calls, calls]
        self.parts: dict[tuple[str, str], _Row] = {}
        self.servers: dict[tuple[str, str], int] = {}  # (session, server) -> calls
        self.armed: dict[tuple[str, str], tuple[str, ...]] = {}
        self.known: dict[str, _Session] = {}  # the sessions a commit wrote
        self.fail: str | None = None
        self.alive = alive
        self._open: tuple[str, str, str] | None = None
        self._session: SessionKey | None = None

    def twin(self) -> MemoryStore:
        """Another store object on the same sessions (its own transaction, its own ``fail``)."""
        other = MemoryStore(self.alive)
        other.totals, other.parts, other.servers, other.armed, other.known = (
            self.totals,
            self.parts,
            self.servers,
            self.armed,
            self.known,
        )
        return other

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
        self._session = session
        totals = self.totals.setdefault(session.key, [0, 0, 0])
        row = self.parts.get((session.key, part)) or _Row()
        return Loaded(row.version, row.state, totals[0], totals[1])

    def commit_blocking(self, saved: Saved, now: float) -> int:
        """:meth:`commit` without an event loop."""
        if self._open is None:
            raise RuntimeError("MemoryStore: no transaction is open")
        key, part, server = self._open
        self._open = None
        self._note(key, server, now)
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

    def _note(self, key: str, server: str, now: float) -> None:
        """The session as a commit leaves it: known (created now if new), used at ``now``."""
        known = self.known.get(key)
        if known is None:
            session = self._session if self._session is not None and self._session.key == key else None
            known = self.known[key] = _Session(session or SessionKey(key=key, kind="named"), now, now)
        known.last = now
        known.server_last[server] = now

    async def sessions(self, now: float) -> list[SessionRow]:
        rows = []
        for key, known in self.known.items():
            s = known.key
            requests, tool_calls, calls = self.totals.get(key, (0, 0, 0))
            armed: set[str] = set()
            for (k, part), row in self.parts.items():
                if k == key and row.state is not None:
                    armed.update(self.armed.get((k, part), ()))
            servers = [
                ServerRow(server, self.servers.get((key, server), 0), last)
                for server, last in sorted(known.server_last.items())
            ]
            rows.append(
                SessionRow(
                    key,
                    s.kind,
                    s.pid,
                    s.process,
                    s.name,
                    self.alive(s),
                    servers,
                    calls,
                    requests,
                    tool_calls,
                    sorted(armed),
                    known.created,
                    known.last,
                )
            )
        rows.sort(key=lambda r: (-r.last, r.key))
        return rows

    async def reset(self, key: str, who: str, now: float) -> bool:
        known = self.known.get(key)
        if known is None:
            return False
        for (k, part), row in self.parts.items():
            if k == key:
                row.version += 1
                row.state = None
                self.armed[(k, part)] = ()
        totals = self.totals[key]
        totals[0] = totals[1] = 0
        known.events.append((now, "reset", who))
        del known.events[:-EVENTS_KEPT]
        return True

    async def sweep(self, now: float, alive: Alive) -> int:
        gone = [key for key, known in self.known.items() if expired(known.key, known.last, now, alive)]
        for key in gone:
            del self.known[key]
            self.totals.pop(key, None)
            for table in (self.parts, self.servers, self.armed):
                for pair in [pair for pair in table if pair[0] == key]:
                    del table[pair]
        return len(gone)

    async def aclose(self) -> None:
        self.abort_blocking()


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
        "store",
        "key",
        "part",
        "server",
        "parts",
        "state",
        "clock",
        "_version",
        "_requests",
        "_calls",
        "_open",
        "_others",
        "problem",
    )

    def __init__(
        self,
        store: Store,
        key: SessionKey,
        part: str,
        server: str,
        state: SessionState,
        parts: Sequence[Part],
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.key = key
        self.part = part
        self.server = server
        self.state = state
        # the shared state of this wrap's stateful guards (flow rules, rate windows, the value
        # taint ...), each under its guard's name (assay.policy.guards)
        self.parts: tuple[Part, ...] = tuple(parts)
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"SharedSession: two parts share a name ({names})")
        self._others: dict[str, Any] = {}  # the stored entries of guards this wrap does not have
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
        entries = _entries(blob)
        mine = self.parts
        values = [entries.pop(p.name, None) for p in mine]
        for p, value in zip(mine, values):
            p.restore(value)
        self._others = entries

    def _export(self) -> tuple[bytes | None, tuple[str, ...]]:
        parts = self.parts
        if not parts:
            return None, ()
        entries = dict(self._others)
        armed: tuple[str, ...] = ()
        for p in parts:
            entries[p.name] = p.export()
            if p.armed is not None:
                armed += p.armed()
        return msgspec.msgpack.encode(entries), armed

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


def _entries(blob: bytes | None) -> dict[str, Any]:
    """The entries of a stored state by guard name: a map (this layout), or an array of the
    layout before it (``[flows, rates]`` or ``[flows, rates, taint]``, read by position). Raises
    ValueError (or msgspec's DecodeError) when it is neither."""
    if blob is None:
        return {}
    got = msgspec.msgpack.decode(blob)
    if got.__class__ is dict:
        if any(k.__class__ is not str for k in got):
            raise ValueError("the shared state's names are not strings")
        entries: dict[str, Any] = got
        return entries
    if got.__class__ is list and len(got) in (2, 3):
        return {name: value for name, value in zip(_OLD_LAYOUT, got) if value is not None}
    raise ValueError("the shared state is neither a map of guard states nor (flows, rates[, taint])")
