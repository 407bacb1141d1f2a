"""How assay writes JSON text: exactly what the standard library's :func:`json.dumps` writes,
computed by msgspec wherever the two agree (sans-IO, no state).

msgspec and :mod:`json` write the same bytes for strings (UTF-8 without ASCII escaping, ``/``
left alone, control characters as ``\\uXXXX`` or the short escapes), integers of any size,
booleans, null, lists and objects with string keys. They differ only on floats: msgspec spells
``1e-7`` and ``1e16`` where :mod:`json` spells ``1e-07`` and ``1e+16``, and writes ``null`` for
``NaN`` and the infinities, which :mod:`json` writes as ``NaN``/``Infinity``. So a value holding
a float anywhere is left to the standard library: the msgpack encoding of a value (C speed) has
a ``0xCB`` byte wherever it holds a float, and any value whose msgpack bytes hold that byte
(a float, or by chance a string or integer) takes the :mod:`json` path. Integers beyond 64 bits
(which msgpack refuses) take it too. The text is therefore always exactly the standard
library's; a false alarm only costs speed.

A lone surrogate (``"\\ud83d"``, which a server or a non-UTF-8 argv byte can produce) has no
UTF-8 form: :func:`dumps_utf8` raises :class:`UnicodeEncodeError` for it and callers write such a
line with :func:`dumps_ascii` instead (docs/wrap-records.md, first section).
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

__all__ = ["dumps", "dumps_ascii", "dumps_utf8", "pretty"]

_encode: Final = msgspec.json.Encoder().encode
_pack: Final = msgspec.msgpack.Encoder().encode
_format: Final = msgspec.json.format
_FLOAT: Final = b"\xcb"  # msgpack's float 64 marker


def _fast(value: Any) -> bytes | None:
    """msgspec's compact JSON of ``value`` when it is certainly the standard library's, else
    None. Raises :class:`UnicodeEncodeError` for a lone surrogate, :class:`TypeError` for a
    value JSON cannot hold."""
    try:
        if _FLOAT in _pack(value):
            return None
    except OverflowError:  # an integer beyond 64 bits
        return None
    return _encode(value)


def dumps_utf8(value: Any) -> bytes:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")``.

    Raises :class:`UnicodeEncodeError` when ``value`` holds a lone surrogate (see
    :func:`dumps_ascii`), and what :func:`json.dumps` raises for a value it cannot write."""
    data = _fast(value)
    if data is not None:
        return data
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def dumps(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``: the compact text, a
    lone surrogate kept as it is in the string."""
    try:
        data = _fast(value)
    except UnicodeEncodeError:
        data = None
    if data is not None:
        return data.decode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def dumps_ascii(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``: every non-ASCII character escaped
    (``\\u00e9``; a character beyond the BMP as its surrogate pair; a lone surrogate as itself).
    The form of a line that holds a lone surrogate somewhere."""
    return json.dumps(value, separators=(",", ":"))


def pretty(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``."""
    try:
        data = _fast(value)
    except UnicodeEncodeError:
        data = None
    if data is not None:
        return _format(data, indent=2).decode("utf-8")
    return json.dumps(value, indent=2, ensure_ascii=False)
