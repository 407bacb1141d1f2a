"""The ``WWW-Authenticate`` challenge of a refused request (sans-IO; docs/auth.md, "What wrap
does with a login").

:func:`parse` reads the header as HTTP defines it (challenges separated by commas, each a scheme
and either a token68 or ``name=value`` parameters, a value a token or a quoted string with
backslash escapes); :func:`refusal` says what a response asks of the client: a 401 (a token, or
a new one) or a 403 ``insufficient_scope`` (more scope). The parameters of the ``Bearer``
challenge are what the flows read: ``error``, ``scope``, ``resource_metadata``. Whatever a server
writes there, the reading is bounded (the first :data:`MAX_HEADER` characters) and never fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

__all__ = ["MAX_HEADER", "Challenge", "Refusal", "parse", "refusal"]

MAX_HEADER = 8192
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_T68 = frozenset("-._~+/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WS = " \t"


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower-cased
    params: dict[str, str]  # names lower-cased; the first of a repeated name counts
    token68: str | None = None


@dataclass(frozen=True)
class Refusal:
    """A refused request: 401, or 403 with ``error="insufficient_scope"``."""

    status: int
    error: str | None
    scope: str | None  # what the server asks for (a 403's: the scope to step up to)
    resource_metadata: str | None

    @property
    def step_up(self) -> bool:
        return self.status == 403


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def skip(self, chars: str) -> None:
        while self.i < len(self.text) and self.text[self.i] in chars:
            self.i += 1

    def token(self, alphabet: frozenset[str] = _TCHAR) -> str:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in alphabet:
            self.i += 1
        return self.text[start : self.i]

    def peek(self) -> str:
        return self.text[self.i] if self.i < len(self.text) else ""

    def quoted(self) -> str | None:
        """A quoted string at the position (its opening quote there), unescaped; None when it
        never closes."""
        out: list[str] = []
        self.i += 1
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch == "\\" and self.i + 1 < len(self.text):
                out.append(self.text[self.i + 1])
                self.i += 2
                continue
            self.i += 1
            if ch == '"':
                return "".join(out)
            out.append(ch)
        return None


def _param(sc: _Scanner) -> tuple[str, str] | None:
    """``name BWS = BWS value`` at the position, or None (the position is then unchanged)."""
    start = sc.i
    name = sc.token()
    sc.skip(_WS)
    if not name or sc.peek() != "=":
        sc.i = start
        return None
    sc.i += 1
    sc.skip(_WS)
    if sc.peek() == '"':
        value = sc.quoted()
        if value is None:
            sc.i = start
            return None
    else:
        value = sc.token()
        if not value:  # "name=" and no value: a token68's padding, not a parameter
            sc.i = start
            return None
    return name.lower(), value


def parse(values: Iterable[str]) -> list[Challenge]:
    """Every challenge of the ``WWW-Authenticate`` field values, in order."""
    out: list[Challenge] = []
    for value in values:
        sc = _Scanner(value[:MAX_HEADER])
        while sc.i < len(sc.text):
            sc.skip(_WS + ",")
            scheme = sc.token()
            if not scheme:
                if sc.i < len(sc.text):
                    sc.i += 1  # not a challenge: step over it
                continue
            params: dict[str, str] = {}
            token68: str | None = None
            sc.skip(_WS)
            first = _param(sc)
            if first is None:
                start = sc.i
                t68 = sc.token(_T68)
                while sc.peek() == "=":
                    t68 += "="
                    sc.i += 1
                sc.skip(_WS)
                if t68 and sc.peek() in ("", ","):
                    token68 = t68
                else:
                    sc.i = start
            else:
                params[first[0]] = first[1]
                while True:
                    mark = sc.i
                    sc.skip(_WS)
                    if sc.peek() != ",":
                        sc.i = mark
                        break
                    sc.skip(_WS + ",")
                    nxt = _param(sc)
                    if nxt is None:  # the next challenge begins here
                        break
                    params.setdefault(nxt[0], nxt[1])
            out.append(Challenge(scheme.lower(), params, token68))
    return out


def refusal(status: int, www_authenticate: Iterable[str]) -> Refusal | None:
    """What a response asks of the client: a :class:`Refusal` for a 401, and for a 403 whose
    Bearer challenge says ``insufficient_scope``; None for anything else."""
    if status not in (401, 403):
        return None
    bearer = next((c for c in parse(www_authenticate) if c.scheme == "bearer"), None)
    params = bearer.params if bearer is not None else {}
    error = params.get("error")
    if status == 403 and error != "insufficient_scope":
        return None
    return Refusal(status, error, params.get("scope") or None, params.get("resource_metadata") or None)
