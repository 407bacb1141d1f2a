"""JSON text as the standard library spells it, made faster with ujson where the two agree.

A leaf module shared by the protocol (reply lines, CallToolResult text) and the tools (the
compact form whose byte length a field limit counts).

ujson and :mod:`json` agree on everything the server writes except floats in exponent form
(`1e-7` against `1e-07`), which always contain `e-` or `e+`; output containing either (or a
value ujson refuses: NaN, infinities, integers beyond 64 bits) is left to the standard library.
So the text is always exactly the standard library's; a false alarm only costs speed.
"""

from __future__ import annotations

import json
from typing import Any

import ujson

__all__ = ["fast_dumps", "compact_json", "compact_size", "measured_size", "pretty_json", "plain_json", "FixedPayload"]

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def fast_dumps(value: Any, indent: int) -> str | None:
    """ujson's text when it is exactly the standard library's, else None."""
    try:
        text = ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False, indent=indent)
    except (OverflowError, TypeError, ValueError, UnicodeError):
        return None
    if "e-" in text or "e+" in text:
        return None
    return text


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""
    text = fast_dumps(value, 0)
    return text if text is not None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_measured: tuple[Any, int] = (None, -1)


def compact_size(value: Any) -> int:
    """UTF-8 byte length (lone surrogates counted as encoded with surrogatepass) of
    :func:`compact_json`; the value and its size are remembered for :func:`measured_size`."""
    global _measured
    text = compact_json(value)
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    _measured = (value, size)
    return size


def measured_size(value: Any) -> int | None:
    """:func:`compact_size` of ``value`` when it is the very object measured last, else None.

    The protocol measures a call's whole ``arguments`` for its log line; a tool bounding a member
    of them can skip its own encoding when the whole is within the bound, as a member's compact
    text is part of the whole's."""
    last = _measured
    return last[1] if last[0] is value else None


def pretty_json(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``."""
    text = fast_dumps(value, 2)
    return text if text is not None else json.dumps(value, indent=2, ensure_ascii=False)


def plain_json(value: Any) -> str | None:
    """The JSON text of a value every encoder here spells alike and that needs no escapes (so it
    cannot make a line fall back to ASCII escapes): a 64-bit int, a bool, None, or a printable
    ASCII string without quote or backslash. None for anything else."""
    kind = type(value)
    if kind is str:
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return '"' + value + '"'
        return None
    if kind is int:
        return str(value) if _I64_MIN <= value <= _I64_MAX else None
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return None


class FixedPayload(dict):
    """A tool payload many calls share (e.g. a plain allow), read-only, with its CallToolResult
    text (:func:`pretty_json`) computed once."""

    __slots__ = ("text",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.text = pretty_json(dict(self))

    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise TypeError("a fixed payload is read-only; copy it with dict(payload)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
