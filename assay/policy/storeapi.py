"""The shared sessions' store as every wrap, the CLI and the session core see it (docs/architecture.md,
"The Store interface"), and :class:`MemoryStore`, the same contract in memory (sans-IO).

:meth:`Store.begin` opens one write transaction and hands over the session's totals and the
state of one *part* (:func:`assay.policy.shared.part_of`); :meth:`Store.commit` writes what the
decision changed and ends it. A call is decided inside that transaction, so two wraps deciding
at the same moment see each other's calls, and a wrap killed mid-decision leaves the store as it
was. :meth:`Store.attempt` is the same in one round trip when the wrap still holds what its last
transaction left (optimistic concurrency): one transaction checks that the part's version and
the totals are what the wrap decided on (:class:`Expect`) and writes, or, when another wrap wrote
meanwhile, stays open and hands over the fresh state as :meth:`Store.begin` would. Besides the transaction, the interface lists the sessions (:meth:`Store.sessions`, what
``assay mcp session list`` shows, as :class:`SessionRow`), resets one (:meth:`Store.reset`),
forgets the expired ones (:meth:`Store.sweep`, with the caller's liveness of a client,
:data:`Alive`) and closes (:meth:`Store.aclose`); every method is a coroutine, and the wrap and
the CLI use nothing else of a store. The SQLite store of one machine is
:mod:`assay.store.sqlite`; a networked store is one more class of the same interface.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol, TypeAlias

import msgspec

__all__ = [
    "NAMED_IDLE",
    "Alive",
    "Expect",
    "Loaded",
    "MemoryStore",
    "Saved",
    "ServerRow",
    "SessionKey",
    "SessionRow",
    "Store",
    "StoreError",
    "expired",
]

NAMED_IDLE = 7 * 86400.0  # a session without a call for 7 days whose liveness no one can tell is forgotten


class SessionKey(msgspec.Struct, frozen=True, gc=False):
    """Which agent session a wrap belongs to (docs/wrap.md, "Shared sessions").

    ``key`` is the store's key and what records carry: ``client:<pid>:<start>:ns<inode>`` for
    the client process that started the wrap (its pid, its start time, so a reused pid is a new
    session, and its PID namespace; docs/wrap.md, "Session keys") or ``name:<name>`` for a named
    session, or ``Identity.key`` for a user of ``assay mcp serve`` (docs/serve.md, "Upstreams and the
    agent session of a user"). ``kind`` is ``client``, ``named`` or ``user`` (a user's ``name`` is
    its subject);
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


class Expect(NamedTuple):
    """What a decision made without the store read (:meth:`Store.attempt`): the part's
    ``version`` and the session's totals as the wrap's last transaction left them."""

    version: int
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
    when ``alive`` says its client is gone, a named or user session idle for more than
    :data:`NAMED_IDLE`, and a client session ``alive`` cannot tell about (None: its PID
    namespace is not this process's) idle as long. A sweep never forgets a session for a client it
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

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        """:meth:`begin` and :meth:`commit` in one round trip, for a call decided on what the
        wrap's last transaction left (docs/wrap.md, "Shared sessions"): in one write transaction,
        when the part's version and the session's totals are those of ``expect``, write
        ``saved`` as :meth:`commit` would and end it: the part's version now (an ``int``).
        Otherwise (another wrap wrote meanwhile, the session was reset or forgotten) write
        nothing, keep the transaction open and hand over the fresh state as :meth:`begin`
        would (a :class:`Loaded`): the caller decides again and commits or aborts. Raises
        :class:`StoreError` (then nothing was written and no transaction is open). A cancelled
        attempt leaves no transaction open; it returns the version anyway when the store wrote
        before it could stop (what it wrote is then known to the caller)."""
        ...

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

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        return self.attempt_blocking(session, part, server, expect, saved, now)

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

    def attempt_blocking(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        """:meth:`attempt` without an event loop."""
        loaded = self.begin_blocking(session, part, server, now)
        if session.key in self.known and expect == (loaded.version, loaded.requests, loaded.tool_calls):
            return self.commit_blocking(saved, now)
        return loaded

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
