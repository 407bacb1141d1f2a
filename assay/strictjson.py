"""Strict JSON decoding, the one set of pieces every reader uses (sans-IO).

Strict means: duplicate member names at any depth, the ``NaN``/``Infinity``/``-Infinity``
literals, and numbers that overflow a double are refused; nesting too deep for the parser is
refused by the callers (a ``RecursionError``). The pieces are :mod:`json` decoder hooks, defined
once here and used as they are by each reader, so each keeps its own speed:

- :func:`unique_pairs` (``object_pairs_hook``): a repeated name raises
  :class:`DuplicateMemberError`, naming the first repeat as the reader meets it; the normal case
  costs one ``dict`` build in C and a length compare;
- :class:`DuplicateFlag` (``object_pairs_hook``): remembers a repeat without aborting, for a
  reader that ranks faults (``assay mcp wrap``'s admission, docs/wrap.md, "Client frames");
- :func:`refuse_constant` (``parse_constant``), :func:`finite_float` (``parse_float``) and
  :func:`bounded_int` (``parse_int``, for text whose long digit runs may overflow a double as
  serde reads them).

Every refusal is a :class:`StrictJSONError` (a ``ValueError``) with a stable ``reason``.
:func:`assay.canonical.loads_strict` is the whole reader of documents (manifests, signed files,
the server's requests); ``assay mcp wrap``'s admission uses the hooks in its own two decoders.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "StrictJSONError",
    "DuplicateMemberError",
    "ConstantError",
    "unique_pairs",
    "DuplicateFlag",
    "refuse_constant",
    "finite_float",
    "bounded_int",
]


class StrictJSONError(ValueError):
    """Input is not strict JSON. ``reason`` is a stable short code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class DuplicateMemberError(StrictJSONError):
    """A member name repeated in one object; ``name`` is the first repeat the reader met."""

    def __init__(self, name: str) -> None:
        super().__init__("duplicate_member", f"duplicate member name {json.dumps(name, ensure_ascii=False)}")
        self.name = name


class ConstantError(StrictJSONError):
    """``NaN``, ``Infinity`` or ``-Infinity`` (``name``): not JSON."""

    def __init__(self, name: str) -> None:
        super().__init__("malformed_json", f"{name} is not valid JSON")
        self.name = name


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a repeated member name (:class:`DuplicateMemberError`)."""
    obj = dict(pairs)  # built in C; a duplicate name leaves it shorter than the list
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise DuplicateMemberError(key)  # the first repeated name, as the reader meets it
            seen.add(key)
    return obj


class DuplicateFlag:
    """``object_pairs_hook`` that builds every object and sets ``duplicate`` when a name repeats
    (the last value wins), so that a reader can report an earlier-ranked fault first. Reset
    ``duplicate`` before each decode; one instance serves one decode at a time."""

    __slots__ = ("duplicate",)

    def __init__(self) -> None:
        self.duplicate = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            self.duplicate = True
        return obj


def refuse_constant(name: str) -> Any:
    """``parse_constant``: ``NaN``/``Infinity``/``-Infinity`` are refused (:class:`ConstantError`)."""
    raise ConstantError(name)


def finite_float(text: str) -> float:
    """``parse_float``: a number that overflows a double is refused."""
    value = float(text)
    if math.isinf(value):
        raise StrictJSONError("malformed_json", "number out of range")
    return value


def bounded_int(text: str) -> int:
    """``parse_int`` as serde reads integers: one too long for a double (over 300 digits that
    overflow) is refused; one beyond Python's digit limit but finite is kept as a float."""
    if len(text) > 300 and math.isinf(float(text)):
        raise StrictJSONError("malformed_json", "number out of range")  # serde reads it as an infinite double
    try:
        return int(text)
    except ValueError:  # Python's digit limit; such a number is finite, keep it as a float
        return float(text)  # type: ignore[return-value]  # the JSON value, as serde would hold it
