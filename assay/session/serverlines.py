"""Reading server lines at least as leniently as the official MCP clients (sans-IO).

A guard that reads less than its client can be dodged: if the client accepts a line that wrap
cannot read, whatever that line carries reaches the client unchecked. So this module reads every
line the TypeScript SDK (``JSON.parse`` over the UTF-8 text, invalid bytes replaced by U+FFFD)
or the Python SDK (pydantic's JSON reader) would read, and more:

- member names with JSON escapes (``"t\\u006fols"``) are decoded like any string;
- invalid UTF-8 is replaced by U+FFFD, as Node does (surrogates written as UTF-8 bytes too);
- lone surrogates (``"\\ud83d"``) are kept as they are;
- integers of any size and ``NaN``/``Infinity`` are read (huge integers beyond Python's
  digit limit are kept as :class:`RawNumber`);
- nesting of any depth is read by an iterative parser (no recursion limit), within a work
  budget: a line that would exceed it is :data:`TOO_HARD` and the caller fails closed;
- in a line that is valid UTF-8 without NUL bytes and nested at most 1,024 deep, numbers are
  also read in the looser spellings ``01``, ``1.``, ``-.5`` and ``-`` (read as 0), as wrap's
  reader read them before it was msgspec (ujson's grammar), so that no line reads otherwise
  than it did (docs/wrap.md, "Tool pins").

msgspec reads every strict JSON line (the usual case, at C speed); what it refuses goes to the
standard library's reader and then to the iterative one.

It also holds the id equivalence of the SDKs (docs/wrap.md, "Dropped server responses"): the
Python SDK turns a string id that ``int()`` accepts into that integer; the TypeScript SDK looks
every response up by ``Number(id)``.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable
from json.decoder import scanstring  # type: ignore[attr-defined]  # public in CPython, missing from typeshed
from typing import Any, Final, cast

import msgspec

__all__ = [
    "NOT_JSON",
    "TOO_HARD",
    "RawNumber",
    "js_number",
    "python_id",
    "read_line",
    "read_text",
]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NOT_JSON: Final = _Marker("NOT_JSON")
"""The line is not JSON for any client (a log line, a fragment): relayed, never interpreted."""

TOO_HARD: Final = _Marker("TOO_HARD")
"""The line may be JSON but reading it would exceed the work budget: fail closed."""

DEEP_PARSE_BUDGET: Final = 200_000
"""Values the iterative parser builds for one line before giving up (a fraction of a second;
only lines nested deeper than the fast readers allow get there, which honest servers never
send)."""


class RawNumber:
    """A JSON number too long for Python's ``int()`` (over 4,300 digits), kept as its text.

    Not a ``str``, so that no canonical form confuses it with a string; the identity digest
    reads ``json_number_text``."""

    __slots__ = ("json_number_text",)

    def __init__(self, text: str) -> None:
        self.json_number_text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawNumber) and other.json_number_text == self.json_number_text

    def __hash__(self) -> int:
        return hash(self.json_number_text)

    def __repr__(self) -> str:
        return f"RawNumber({self.json_number_text[:20]}...)"


_decode: Final = msgspec.json.Decoder().decode


def read_line(line: bytes, budget: int = DEEP_PARSE_BUDGET) -> Any:
    """The JSON value of one server line, :data:`NOT_JSON` or :data:`TOO_HARD`. Never raises.

    msgspec refuses invalid UTF-8 (a surrogate written as UTF-8 bytes too: Node reads U+FFFD
    for each byte, a strict Python client refuses the line), so such a line is decoded with
    replacement characters and read by the fallbacks."""
    try:
        return _decode(line)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError):
        pass  # msgspec.DecodeError is a ValueError
    try:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return read_text(line.decode("utf-8", "replace"), budget)
    except MemoryError:  # pragma: no cover - a line the relay already holds
        return TOO_HARD
    return read_text(text, budget, loose_numbers=b"\x00" not in line)


def _parse_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return RawNumber(text)


def read_text(text: str, budget: int = DEEP_PARSE_BUDGET, *, loose_numbers: bool = False) -> Any:
    """Like :func:`read_line` for decoded text (the standard library first, then iterative).
    ``loose_numbers``: a line the standard library refuses is read once more with the looser
    number spellings (see the module's docstring), nested at most :data:`LOOSE_MAX_DEPTH` deep."""
    deep = False
    try:
        return json.loads(text, strict=False, parse_int=_parse_int)
    except RecursionError:
        deep = True
    except (ValueError, TypeError, OverflowError, MemoryError):
        if not loose_numbers:
            return NOT_JSON
    collecting = gc.isenabled()
    gc.disable()  # millions of fresh containers would trigger full collections over and over
    try:
        if deep:
            try:
                return _parse_iterative(text, budget)
            except (ValueError, TypeError, OverflowError, IndexError):
                if not loose_numbers:
                    raise
        return _parse_iterative(text, budget, loose=True)
    except _TooHard:
        return TOO_HARD
    except (ValueError, TypeError, OverflowError, IndexError, MemoryError):
        return NOT_JSON
    finally:
        if collecting:
            gc.enable()


class _TooHard(Exception):
    pass


_WS = re.compile(r"[ \t\n\r]*")
# the pattern matches everywhere (possibly empty), so its match is never None
_skip_ws = cast("Callable[[str, int], re.Match[str]]", _WS.match)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
# ujson's number grammar, which wrap read server lines with before msgspec: leading zeros, a
# point without digits after it, a fraction without digits before it, and a lone minus (0)
_LOOSE_NUMBER = re.compile(r"-?(?:(?:[0-9]+(\.[0-9]*)?|(\.)[0-9]+)([eE][-+]?[0-9]+)?)?")
LOOSE_MAX_DEPTH: Final = 1024
_I64_MAGNITUDE: Final = 1 << 63
_U64_MAX: Final = (1 << 64) - 1
_LITERALS: Final = (
    ("true", True),
    ("false", False),
    ("null", None),
    ("NaN", float("nan")),
    ("Infinity", float("inf")),
    ("-Infinity", float("-inf")),
)


def _loose_int(token: str) -> int:
    """An integer in ujson's reading: any leading zeros while the value fits 64 bits, else at
    most 4,300 digits (the zeros counted)."""
    negative = token[:1] == "-"
    digits = token[1:] if negative else token
    significant = digits.lstrip("0")
    if len(significant) <= 20:
        value = int(significant or "0")
        if value <= (_I64_MAGNITUDE if negative else _U64_MAX):
            return -value if negative else value
    if len(digits) > 4300:
        raise ValueError("integer too long")
    return int(token)


def _parse_iterative(text: str, budget: int, loose: bool = False) -> Any:
    """A JSON parser with an explicit stack: any depth, linear time, ``budget`` values.
    ``loose``: numbers in ujson's grammar, nesting at most :data:`LOOSE_MAX_DEPTH`."""
    n = len(text)
    ws = _skip_ws
    number = (_LOOSE_NUMBER if loose else _NUMBER).match
    stack: list[list[Any]] = []  # [container, pending key]
    i = ws(text, 0).end()
    steps = 0
    while True:
        steps += 1
        if steps > budget:
            raise _TooHard
        if i >= n:
            raise ValueError("unexpected end")
        c = text[i]
        value: Any
        if c == "{":
            i = ws(text, i + 1).end()
            if i < n and text[i] == "}":
                value, i = {}, i + 1
            else:
                key, i = _key(text, i, n)
                stack.append([{}, key])
                if loose and len(stack) > LOOSE_MAX_DEPTH:
                    raise ValueError("too deep")
                i = ws(text, i).end()
                continue
        elif c == "[":
            i = ws(text, i + 1).end()
            if i < n and text[i] == "]":
                value, i = [], i + 1
            else:
                stack.append([[], None])
                if loose and len(stack) > LOOSE_MAX_DEPTH:
                    raise ValueError("too deep")
                continue
        elif c == '"':
            value, i = scanstring(text, i + 1, False)
        else:
            for word, literal in _LITERALS:
                if text.startswith(word, i):
                    value, i = literal, i + len(word)
                    break
            else:
                m = number(text, i)
                if m is None or (loose and c not in "-0123456789"):
                    raise ValueError("unexpected character")
                token = m.group()
                i = m.end()
                if loose:
                    value = float(token) if m.group(1) or m.group(2) or m.group(3) else _loose_int(token)
                else:
                    value = float(token) if m.group(1) or m.group(2) else _parse_int(token)
        # attach the value and close every container that ends here
        while True:
            if not stack:
                if ws(text, i).end() != n:
                    raise ValueError("trailing data")
                return value
            top = stack[-1]
            container = top[0]
            if container.__class__ is dict:
                container[top[1]] = value
            else:
                container.append(value)
            i = ws(text, i).end()
            if i >= n:
                raise ValueError("unexpected end")
            c = text[i]
            if c == ",":
                i = ws(text, i + 1).end()
                if container.__class__ is dict:
                    top[1], i = _key(text, i, n)
                    i = ws(text, i).end()
                break
            if c == ("}" if container.__class__ is dict else "]"):
                stack.pop()
                value = container
                i += 1
                continue
            raise ValueError("expected , or a closing bracket")


def _key(text: str, i: int, n: int) -> tuple[str, int]:
    """A member name and the ``:`` after it; returns the index after the colon."""
    if i >= n or text[i] != '"':
        raise ValueError("expected a member name")
    key, i = scanstring(text, i + 1, False)
    i = _skip_ws(text, i).end()
    if i >= n or text[i] != ":":
        raise ValueError("expected :")
    return key, _skip_ws(text, i + 1).end()


# ---------------------------------------------------------------------------------------------
# Id equivalence of the SDKs
# ---------------------------------------------------------------------------------------------

# What JavaScript's StringToNumber trims: WhiteSpace and LineTerminator code points.
_JS_SPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_JS_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_JS_RADIX = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_RADIX: Final = {"x": 16, "o": 8, "b": 2}


def js_number(value: Any) -> float | None:
    """``Number(value)`` for a JSON string or number id, None for NaN or any other type."""
    if value.__class__ is bool or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            return float("inf") if value > 0 else float("-inf")
        return None if number != number else number
    if not isinstance(value, str):
        return None
    text = value.strip(_JS_SPACE)
    if not text:
        return 0.0
    if len(text) > 4096:  # no id the client sent is that long; Number() of it matches nothing
        return None
    if _JS_RADIX.fullmatch(text):
        try:
            return float(int(text[2:], _RADIX[text[1].lower()]))
        except OverflowError:
            return float("inf")
    if _JS_DECIMAL.fullmatch(text):
        return float(text)
    return None


def python_id(value: Any) -> Any:
    """The Python SDK's correlation form of an id: a string ``int()`` accepts becomes that
    integer; other strings and integers stay; anything else (floats, bools, null) is None."""
    if value.__class__ is bool:
        return None
    if value.__class__ is int or isinstance(value, int):
        return value
    if isinstance(value, str):
        if len(value) > 4096:
            return value
        try:
            return int(value)
        except ValueError:
            return value
    return None
