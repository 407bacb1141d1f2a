"""Closed-shape checking for the manifest documents (docs/manifest.md, "Rules for every file":
strict JSON, closed objects). Sans-IO.

The documents are small, fixed and security-relevant, so every object is *closed*: a member this
code does not know is refused (an approval that contains something nobody validated is not an
approval). Members are visited in document order, the first unknown member or wrong type wins,
missing members are reported after that -- the order a strict deserializer reports them in.

Messages contain ``unknown field``, ``missing field``, ``invalid type`` or ``invalid value``, then
where (``$.observed.tool_digests[0]``) and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ShapeError",
    "Check",
    "Field",
    "closed_object",
    "string",
    "boolean",
    "uint",
    "nullable",
    "array_of",
    "string_map",
]


class ShapeError(ValueError):
    """A document does not have the closed shape its schema requires."""


Check = Callable[[Any, str], None]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{json.dumps(value)}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {json.dumps(value, ensure_ascii=False)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__  # pragma: no cover - JSON has no other kinds


def _type_error(path: str, value: Any, expected: str) -> ShapeError:
    return ShapeError(f"invalid type at {path}: {_kind(value)}, expected {expected}")


def string(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise _type_error(path, value, "a string")


def boolean(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _type_error(path, value, "a boolean")


def uint(value: Any, path: str) -> None:
    """A JSON non-negative integer: ``1.0`` is a type error, ``-1`` an invalid value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(path, value, "a non-negative integer")
    if value < 0:
        raise ShapeError(f"invalid value at {path}: integer `{value}`, expected a non-negative integer")


def nullable(inner: Check) -> Check:
    def check(value: Any, path: str) -> None:
        if value is not None:
            inner(value, path)

    return check


def array_of(inner: Check) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise _type_error(path, value, "an array")
        for index, item in enumerate(value):
            inner(item, f"{path}[{index}]")

    return check


def string_map(value: Any, path: str) -> None:
    """An object whose values are all strings (keys are free; callers validate them)."""
    if not isinstance(value, dict):
        raise _type_error(path, value, "an object")
    for key, item in value.items():
        string(item, _member_path(path, key))


@dataclass(frozen=True)
class Field:
    name: str
    check: Check
    required: bool = True  # optional members may be absent (and, being nullable, null)


def _member_path(path: str, name: str) -> str:
    if name.isidentifier():
        return f"{path}.{name}"
    return f"{path}[{json.dumps(name, ensure_ascii=False)}]"


def closed_object(*fields: Field) -> Check:
    by_name = {field.name: field for field in fields}

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _type_error(path, value, "an object")
        for name, item in value.items():
            field = by_name.get(name)
            if field is None:
                expected = ", ".join(json.dumps(f.name) for f in fields)
                raise ShapeError(
                    f"unknown field {json.dumps(name, ensure_ascii=False)} at {path}, expected one of {expected}"
                )
            field.check(item, _member_path(path, name))
        for field in fields:
            if field.required and field.name not in value:
                raise ShapeError(f"missing field {json.dumps(field.name)} at {path}")

    return check
