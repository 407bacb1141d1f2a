"""One agent session across the servers of a client (docs/policy.md, "Sessions"): the shared
state of the flow rules, per-tool rate windows and session totals, kept in a store that every
wrap of the session decides in (sans-IO).

The store is the interface of :mod:`assay.policy.storeapi` (begin / commit / abort, and
sessions / reset / sweep / aclose); :class:`MemoryStore` there is the same contract in memory.

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
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from assay.policy.storeapi import Expect, Loaded, Saved, SessionKey, Store, StoreError

if TYPE_CHECKING:
    from assay.policy.model import Policy
    from assay.policy.state import SessionState

__all__ = [
    "SESSION_STATE",
    "Part",
    "SharedSession",
    "part_of",
    "shares_state",
    "uses_taint",
]

SESSION_STATE = "E_SESSION_STATE"  # the reason code of a call denied because the store failed

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
    :meth:`aborting`. Once a transaction was saved, the next call may be decided on what it left,
    without opening one (:meth:`expecting`: what the store is to still hold; the store's
    ``attempt`` checks it and writes in one round trip), and when another wrap wrote meanwhile
    decided again on the fresh state (:meth:`conflicted`, then :meth:`loaded`). Requests that are not ``tools/call`` are counted in ``state`` only and reach
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
        # what was counted since is this wrap's, over the store's totals now (also when the
        # transaction ends without a commit: another wrap's calls are never counted twice)
        self._requests, self._calls = got.requests, got.tool_calls
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

    def expecting(self) -> Expect | None:
        """What the store holds if no other wrap wrote since this wrap's last transaction (the
        part's version, the totals as saved): a call may be decided on the trackers as they
        are and saved with the store's ``attempt``. None when the trackers are not known to be
        the store's (no transaction yet, or the last one failed or was aborted)."""
        if self._version < 0 or self._open:
            return None
        return Expect(self._version, self._requests, self._calls)

    def conflicted(self) -> None:
        """The store's ``attempt`` found another wrap's write (and handed over the fresh state,
        its transaction open): what the trackers hold now (the call decided on them) is read
        again from the store at :meth:`loaded`, whatever its version."""
        self._version = -1

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
