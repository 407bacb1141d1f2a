"""The typed walk over a parsed policy document (docs/policy.md, "Loading").

:class:`Reader` checks one value at a time against the type a field needs and records unknown
keys; :class:`Structure` is the type mismatch it raises (the loader turns it into a
``PolicyError`` of class ``structure``); :func:`json_value` checks that a YAML value is plain JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, overload

__all__ = ["Structure", "Reader", "join", "json_value", "type_name", "unknown_key", "U64_MAX"]

U64_MAX = 2**64 - 1


class Structure(Exception):
    """A type mismatch at ``path``; becomes PolicyError(kind="structure")."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def unknown_key(path: str, key: str, known: tuple[str, ...]) -> str:
    """The dotted path of an unknown key, with the known key it most likely misspells:
    ``tools.approvals_required (did you mean tools.approval_required?)`` (docs/policy.md,
    "Loading"). Case is ignored in the comparison; no close key, no suggestion."""
    import difflib

    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
    where = join(path, key)
    return f"{where} (did you mean {join(path, lowered[close[0]])}?)" if close else where


class Reader:
    """Walks the parsed document, recording unknown keys (each with its did-you-mean,
    :func:`unknown_key`)."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    @overload
    def mapping(self, value: Any, path: str, *, optional: Literal[False] = False) -> dict[str, Any]: ...
    @overload
    def mapping(self, value: Any, path: str, *, optional: bool) -> dict[str, Any] | None: ...
    def mapping(self, value: Any, path: str, *, optional: bool = False) -> dict[str, Any] | None:
        if value is None and optional:
            return None
        if not isinstance(value, dict):
            raise Structure(path, f"expected a mapping, got {type_name(value)}")
        for key in value:
            if not isinstance(key, str):
                raise Structure(path, f"mapping key {key!r} is not a string")
        return value

    def fields(self, value: dict[str, Any], path: str, known: tuple[str, ...]) -> None:
        for key in value:
            if key not in known:
                self.unknown.append(unknown_key(path, key, known))

    @overload
    def string(self, value: Any, path: str, *, optional: Literal[False] = False) -> str: ...
    @overload
    def string(self, value: Any, path: str, *, optional: bool) -> str | None: ...
    def string(self, value: Any, path: str, *, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            hint = " (quote it)" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
            raise Structure(path, f"expected a string, got {type_name(value)}{hint}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise Structure(path, f"expected a boolean, got {type_name(value)}")
        return value

    def u64(self, value: Any, path: str, *, optional: bool = True) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise Structure(path, f"expected an unsigned integer, got {type_name(value)}")
        if value < 0 or value > U64_MAX:
            raise Structure(path, f"expected an unsigned integer, got {value}")
        return value

    def strings(self, value: Any, path: str, *, optional: bool = True) -> tuple[str, ...] | None:
        if value is None and optional:
            return None
        if not isinstance(value, list):
            raise Structure(path, f"expected a list of strings, got {type_name(value)}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise Structure(f"{path}[{i}]", f"expected a string, got {type_name(item)}")
            out.append(item)
        return tuple(out)

    def enum(self, value: Any, path: str, choices: tuple[str, ...]) -> str:
        text = self.string(value, path)
        if text not in choices:
            raise Structure(path, f"unknown value {json.dumps(text)} (expected one of {', '.join(choices)})")
        return text


def json_value(value: Any, path: str) -> Any:
    """Check that a YAML value is plain JSON (string keys, finite numbers); iterative."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise Structure(where, "a non-finite number is not valid JSON")
            continue
        if isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
            continue
        if isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    raise Structure(where, f"mapping key {k!r} is not a string")
                stack.append((v, join(where, k)))
            continue
        raise Structure(where, f"{type_name(item)} is not a JSON value")
    return value


def type_name(value: Any) -> str:
    """How a policy error names the kind of a parsed YAML value: ``a string``, ``a list``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
