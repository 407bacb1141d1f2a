"""Drive a WrapSession in memory the way the relay does: bytes in, effects out, no processes.

``Harness.client(data)`` and ``Harness.server(data)`` return the effects of one read;
``handle`` and ``server_line`` are the frame-level views most tests want. A fake clock stands in
for trio's, so lifecycle tests advance time instead of sleeping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from assay.policy.storeapi import StoreError
from assay.session.admission import admit
from assay.session.effects import (
    AdmitLine,
    Effect,
    Record,
    Sink,
    StoreAbort,
    StoreAttempt,
    StoreBegin,
    StoreCommit,
    ToClient,
    ToServer,
    Warn,
)
from assay.session.session import SessionOptions, WrapSession


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Effects(list):
    """The effects of one call, with views by kind."""

    @property
    def to_server(self) -> bytes:
        return b"".join(e.data for e in self if isinstance(e, ToServer))

    @property
    def to_client(self) -> bytes:
        return b"".join(e.data for e in self if isinstance(e, ToClient))

    @property
    def warnings(self) -> list[str]:
        return [e.text for e in self if isinstance(e, Warn)]

    def records(self, sink: Sink) -> list[bytes]:
        return [e.data for e in self if isinstance(e, Record) and e.sink is sink]

    def kinds(self) -> list[str]:
        return [type(e).__name__ for e in self]


@dataclass
class Outcome:
    """What one client frame did."""

    disposition: str  # forwarded | blocked | rejected | dropped | none
    reply: bytes | None
    forward: bytes | None
    effects: Effects = field(default_factory=Effects)

    @property
    def stderr(self) -> list[str]:
        return self.effects.warnings


def line_of(frame: dict[str, Any] | bytes) -> bytes:
    if isinstance(frame, bytes):
        return frame if frame.endswith(b"\n") else frame + b"\n"
    return json.dumps(frame).encode() + b"\n"


class Harness:
    def __init__(self, policy: Any, options: SessionOptions | None = None, **kwargs: Any) -> None:
        self.clock = FakeClock()
        self.session = WrapSession(policy, options or SessionOptions(), clock=self.clock, **kwargs)
        shared = kwargs.get("shared")
        self.store = shared[0] if shared is not None else None

    def __getattr__(self, name: str) -> Any:  # policy, state, dropped_responses, last_chain, ...
        return getattr(self.session, name)

    def _run(self, effects: list[Effect]) -> Effects:
        """Perform AdmitLine in place (the relay runs it in a thread), and the shared session's
        store effects with the store's blocking methods (the relay awaits them in its store
        task); keep everything else."""
        out = Effects()
        todo = list(effects)
        while todo:
            effect = todo.pop(0)
            if isinstance(effect, AdmitLine):
                todo[0:0] = self.session.admitted(admit(effect.line))
            elif isinstance(effect, StoreAttempt):
                try:
                    got = self.store.attempt_blocking(
                        effect.key, effect.part, effect.server, effect.expect, effect.saved, effect.now
                    )
                except StoreError as exc:
                    got = exc
                todo[0:0] = self.session.store_attempted(got)
            elif isinstance(effect, StoreBegin):
                try:
                    got: Any = self.store.begin_blocking(effect.key, effect.part, effect.server, effect.now)
                except StoreError as exc:
                    got = exc
                todo[0:0] = self.session.store_begun(got)
            elif isinstance(effect, StoreCommit):
                try:
                    got = self.store.commit_blocking(effect.saved, effect.now)
                except StoreError as exc:
                    got = exc
                todo[0:0] = self.session.store_committed(got)
            elif isinstance(effect, StoreAbort):
                self.store.abort_blocking()
            else:
                out.append(effect)
        return out

    def client(self, data: bytes) -> Effects:
        return self._run(self.session.receive_client_data(data))

    def client_closed(self) -> Effects:
        return self._run(self.session.client_closed())

    def server(self, data: bytes) -> Effects:
        return self._run(self.session.receive_server_data(data))

    def handle(self, frame: dict[str, Any] | bytes) -> Outcome:
        raw = line_of(frame)
        effects = self.client(raw)
        forward = effects.to_server or None
        reply = effects.to_client or None
        if forward == raw:
            disposition = "forwarded"
        elif reply is not None:
            disposition = "rejected" if b'"error"' in reply and b'"result"' not in reply else "blocked"
        elif self.session.counts["dropped"]:
            disposition = "dropped"
        else:
            disposition = "none"
        return Outcome(disposition, reply, forward, effects)

    def server_line(self, line: bytes) -> tuple[bool, list[str]]:
        """One whole server line (without its LF): (relayed, stderr lines)."""
        effects = self.server(line + b"\n")
        return effects.to_client == line + b"\n", effects.warnings


class EntrySpy:
    """A guard of the decision pipeline that objects to nothing and notes every call that
    enters (went to the server): the session's history as the guards see it."""

    def __init__(self) -> None:
        self.entered: list[tuple[str, object]] = []

    def check(self, call, decision, now):
        return None

    def enter(self, call, now) -> None:
        self.entered.append((call.name, call.arguments))


def add_guard(session, guard) -> None:
    """Append ``guard`` to ``session``'s decision pipeline (after its own guards, before approvals)."""
    from assay.policy.pipeline import Pipeline

    p = session._pipeline
    session._pipeline = Pipeline(p.policy, p.state, [*p.guards, guard], p.approvals, clock=p.clock)
