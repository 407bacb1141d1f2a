"""JSON text as the standard library spells it (computed by msgspec where the two agree, see
:mod:`assay.jsonwrite`).

A leaf module shared by the protocol (reply lines, CallToolResult text) and the tools (the
compact form whose byte length a field limit counts).
"""

from __future__ import annotations

from typing import Any

from assay.jsonwrite import dumps, pretty

__all__ = ["compact_json", "compact_size", "measured_size", "pretty_json", "plain_json", "FixedPayload"]

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""
    return dumps(value)


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
    return pretty(value)


def plain_json(value: Any) -> str | None:
    """The JSON text of a value every encoder here spells alike and that needs no escapes (so it
    cannot make a line fall back to ASCII escapes): a 64-bit int, a bool, None, or a printable
    ASCII string without quote or backslash. None for anything else."""
    kind = type(value)
    if kind is str:
        text: str = value
        if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
            return '"' + text + '"'
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


class FixedPayload(dict[str, Any]):
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
