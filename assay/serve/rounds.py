"""What an upstream asks a 2026-07-28-era client, in rounds (docs/serve.md, "What upstreams ask
of a 2026-07-28 client").

A link is a 2025-era session: its upstream asks the user by sending requests (sampling,
elicitation, ``roots/list``) while a call is in flight. A 2026-07-28 client takes no requests of
a server: it is asked with an ``input_required`` result and retries its request with the
answers (multi round-trip requests). So the gateway runs a 2026-07-28 client's request to a link
as a :class:`Flight`, a task of the gateway's own that outlives the client's first round:

- the upstream's answer ends the round in hand with it;
- the upstream's requests end the round with an ``input_required`` result: each request under
  the gateway's id for it in ``inputRequests``, and a ``requestState`` ``assay-upstream.<token>``
  (128 random bits) naming the flight, parked for the user for at most :data:`PARK_S` seconds;
- the retry (the same request, with ``inputResponses`` and that ``requestState``) takes the
  flight back: each answer goes to the upstream's request (a missing one is answered with an
  error), and the round waits for what comes next.

The flight is kept in the memory of the process that asked, for the user who asked: a retry
reaching another process, another user's token or a state that expired is refused with -32602.
Cancelling a round that waits cancels the flight (the upstream is told).
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
import trio

from assay.gateway.contract import Emit
from assay.gateway.router import INVALID_PARAMS, UPSTREAM_FAILED, error

__all__ = ["MAX_ASKS", "MAX_PARKED", "PARK_S", "STATE_PREFIX", "Flight", "Parked", "same_request"]

STATE_PREFIX: Final = "assay-upstream."
PARK_S: Final = 300.0  # a flight waits this long for the client's retry, then is cancelled
MAX_ASKS: Final = 8  # the upstream's unanswered requests in one flight (past it the call is cancelled)
MAX_PARKED: Final = 64  # flights waiting for a retry, per user (past it the oldest is cancelled)
_STATE = re.compile(r"assay-upstream\.([0-9a-f]{32})")
_ROUND_MEMBERS: Final = ("inputResponses", "requestState", "_meta")
_encode = msgspec.json.Encoder(order="sorted")
NO_ANSWER: Final = -32603


def same_request(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two requests' params are the same request (the round's own members and ``_meta``
    aside), compared as canonical JSON."""
    try:
        left = _encode.encode({k: v for k, v in a.items() if k not in _ROUND_MEMBERS})
        right = _encode.encode({k: v for k, v in b.items() if k not in _ROUND_MEMBERS})
    except (TypeError, ValueError, OverflowError, RecursionError):
        return False
    return left == right


class Flight:
    """One 2026-07-28-era request in flight upstream, across the client's rounds."""

    __slots__ = ("method", "params", "answer", "done", "asks", "shown", "_changed", "emit", "scope", "token")

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params  # as the client sent them (the retry must be the same request)
        self.answer: dict[str, Any] | None = None
        self.done = trio.Event()
        self.asks: dict[str, dict[str, Any]] = {}  # gateway id -> the upstream's request, unanswered
        self.shown: tuple[str, ...] = ()  # the ids the last input_required asked the client
        self._changed = trio.Event()
        self.emit: Emit | None = None  # the round in hand's stream (notifications go there)
        self.scope = trio.CancelScope()
        self.token: str | None = None  # while parked

    async def related(self, message: dict[str, Any]) -> None:
        """What the upstream sends during the call: a request is asked in the next
        ``input_required``; a notification goes to the round in hand (none: dropped)."""
        method = message.get("method")
        if "id" in message and isinstance(method, str):
            if len(self.asks) >= MAX_ASKS:  # an upstream that asks without end fails its call
                self.scope.cancel()
                return
            self.asks[str(message["id"])] = message
            self._wake()
            return
        params = message.get("params")
        if method == "notifications/cancelled" and isinstance(params, dict):  # the upstream withdrew one
            self.asks.pop(str(params.get("requestId")), None)
        emit = self.emit
        if emit is not None:
            await emit(message)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def run(self, send: Callable[[], Awaitable[dict[str, Any]]], end: Callable[[], None]) -> None:
        """The request upstream (``send``), in the gateway's nursery; ``end`` undoes what the
        flight registered once it is over."""
        try:
            with self.scope:
                self.answer = await send()
        finally:
            end()
            if self.answer is None:
                self.answer = error(None, UPSTREAM_FAILED, "the request was cancelled before the upstream answered")
            self.done.set()
            self._wake()

    async def round(self, emit: Emit, park: Callable[[Flight], str]) -> dict[str, Any]:
        """One round of the client's: the upstream's answer, or an ``input_required`` result
        asking what the upstream asked (the flight is then parked: ``park`` gives its token).
        Cancelled: the flight is cancelled too."""
        self.emit = emit
        try:
            while not self.done.is_set() and not self.asks:
                await self._changed.wait()
        except trio.Cancelled:
            self.scope.cancel()
            raise
        finally:
            self.emit = None
        if self.done.is_set():
            assert self.answer is not None
            return self.answer
        self.token = park(self)
        self.scope.deadline = trio.current_time() + PARK_S
        requests = {mine: {"method": m["method"], "params": m.get("params", {})} for mine, m in self.asks.items()}
        self.shown = tuple(requests)
        result = {"resultType": "input_required", "inputRequests": requests, "requestState": STATE_PREFIX + self.token}
        return {"jsonrpc": "2.0", "id": None, "result": result}

    def resume(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The client's answers in a retry's ``inputResponses``: the JSON-RPC responses to send
        the upstream's requests with (by the gateway's ids; a missing answer is an error)."""
        self.scope.deadline = math.inf
        self.token = None
        responses = params.get("inputResponses")
        responses = responses if isinstance(responses, dict) else {}
        out: list[dict[str, Any]] = []
        # only what the client was shown: a request the upstream made since waits for the next round
        shown, self.shown = self.shown, ()
        for mine in shown:
            if self.asks.pop(mine, None) is None:
                continue
            answer = responses.get(mine)
            if isinstance(answer, dict):
                out.append({"jsonrpc": "2.0", "id": mine, "result": answer})
            else:
                out.append(
                    {"jsonrpc": "2.0", "id": mine, "error": {"code": NO_ANSWER, "message": "the client gave no answer"}}
                )
        return out


class Parked:
    """One user's flights waiting for the client's retry, by token (at most :data:`MAX_PARKED`;
    past it the oldest is cancelled)."""

    def __init__(self) -> None:
        self._flights: dict[str, Flight] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def park(self, flight: Flight) -> str:
        while len(self._flights) >= MAX_PARKED:
            oldest = next(iter(self._flights))
            self._flights.pop(oldest).scope.cancel()
        token = secrets.token_hex(16)
        self._flights[token] = flight
        return token

    def drop(self, flight: Flight) -> None:
        """A flight that ended (answered, cancelled, expired) waits for no retry."""
        token = flight.token
        if token is not None and self._flights.get(token) is flight:
            del self._flights[token]

    def take(self, state: Any, method: str, params: dict[str, Any]) -> Flight | dict[str, Any]:
        """The parked flight a retry's ``requestState`` names, taken; else the error to answer
        (-32602): unknown, expired, or another request's."""
        m = _STATE.fullmatch(state) if isinstance(state, str) else None
        flight = self._flights.get(m.group(1)) if m is not None else None
        if flight is None or flight.done.is_set():
            if m is not None:
                self._flights.pop(m.group(1), None)
            return error(None, INVALID_PARAMS, "the requestState names no request waiting for an answer here")
        if flight.method != method or not same_request(flight.params, params):
            return error(None, INVALID_PARAMS, "the requestState is another request's")
        del self._flights[m.group(1)]  # type: ignore[union-attr]
        return flight

    def claims(self, params: dict[str, Any]) -> bool:
        state = params.get("requestState")
        return isinstance(state, str) and state.startswith(STATE_PREFIX)
