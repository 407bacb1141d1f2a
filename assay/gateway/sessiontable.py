"""The 2025-era session table and the users' requests in flight, sans-IO (docs/serve.md, "How a
request flows"): ids bound to the user who opened them (random, or sealed by
:mod:`assay.gateway.sealed`; idle expiry on an injected clock; another user's id is a 404), and
each user's requests in flight, capped (429)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from assay.gateway.http import INVALID_REQUEST, REFUSED, Refusal

__all__ = ["InFlight", "Session", "Sessions", "new_session_id"]
T = TypeVar("T")


def new_session_id() -> str:
    """192 random bits, URL-safe (visible ASCII, as a header value must be)."""
    return secrets.token_urlsafe(24)


@dataclass
class Session(Generic[T]):
    id: str
    owner: str  # the Identity.key that opened it
    conversation: T
    last_used: float
    busy: int = 0


class Sessions(Generic[T]):
    """The 2025-era sessions: id -> the conversation, bound to the user who opened it. Another
    user's id, or an unknown one, is a 404 (the two are not told apart)."""

    def __init__(self, idle_s: float, make_id: Callable[[], str] = new_session_id) -> None:
        self.idle_s = idle_s
        self._make_id = make_id
        self._table: dict[str, Session[T]] = {}

    def __len__(self) -> int:
        return len(self._table)

    def add(self, owner: str, conversation: T, now: float, session_id: str | None = None) -> Session[T]:
        """A new session of ``owner``: under ``session_id`` when given (a sealed id, unique by its
        random nonce), else under a new random id."""
        if session_id is None:
            session_id = self._make_id()
            while session_id in self._table:
                session_id = self._make_id()
        session = Session(session_id, owner, conversation, now)
        self._table[session_id] = session
        return session

    def find(self, session_id: str, owner: str, now: float, msg_id: Any = None) -> Session[T]:
        session = self.get(session_id, owner, now)
        if session is None:
            raise Refusal(404, REFUSED, "Session not found", msg_id)
        return session

    def get(self, session_id: str, owner: str, now: float) -> Session[T] | None:
        """The session ``session_id`` of ``owner`` (marked used now), or None."""
        session = self._table.get(session_id)
        if session is None or not secrets.compare_digest(session.owner.encode(), owner.encode()):
            return None
        session.last_used = now
        return session

    def remove(self, session_id: str) -> Session[T] | None:
        return self._table.pop(session_id, None)

    def expired(self, now: float) -> list[Session[T]]:
        """Removes and returns the sessions idle (no request in flight) for ``idle_s``."""
        gone = [s for s in self._table.values() if s.busy == 0 and now - s.last_used >= self.idle_s]
        for session in gone:
            del self._table[session.id]
        return gone

    def next_expiry(self) -> float | None:
        """When the next idle session expires, if nothing uses it."""
        idle = [s.last_used + self.idle_s for s in self._table.values() if s.busy == 0]
        return min(idle, default=None)

    def clear(self) -> list[Session[T]]:
        gone = list(self._table.values())
        self._table.clear()
        return gone


class InFlight:
    """Requests of each user in flight, capped: past the cap a request is refused (429)."""

    def __init__(self, limit: int, retry_after_s: int = 1) -> None:
        self.limit = limit
        self.retry_after_s = retry_after_s
        self._count: dict[str, int] = {}

    def acquire(self, key: str) -> None:
        count = self._count.get(key, 0)
        if count >= self.limit:
            raise Refusal(
                429, INVALID_REQUEST, "Too many requests in flight", headers=(("retry-after", str(self.retry_after_s)),)
            )
        self._count[key] = count + 1

    def release(self, key: str) -> None:
        count = self._count.get(key, 0) - 1
        if count > 0:
            self._count[key] = count
        else:
            self._count.pop(key, None)

    def __getitem__(self, key: str) -> int:
        return self._count.get(key, 0)
