"""Path confinement: is a path argument inside one of the allowed directories?

Sans-IO by default: paths are compared in their lexical normal form (docs/policy.md, 'Path
confinement'). Only a rule with ``resolve_symlinks: true`` touches the file system, through the
``realpath`` function the caller passes (``os.path.realpath`` by default).

Lexical normal form of a path argument:

- a ``file:`` URI (``file:///p``, ``file://localhost/p``, ``file:/p``) is read as the path it
  names by :mod:`assay.policy.fileuri`, which refuses every spelling that servers' URL parsers
  read differently (a backslash, an encoded ``/``, a ``..`` segment, ...), another host, a query
  and a fragment;
- a leading ``~`` is refused (servers expand it to a home directory the policy cannot see);
- a relative path is joined to the rule's ``base``; without a base it is refused;
- empty and ``.`` components and repeated slashes are dropped, ``..`` removes the component
  before it; a ``..`` that climbs above ``/`` is refused.

A path is inside a directory when its normal form equals the directory or continues it at a
component boundary (``/workspace2`` is not inside ``/workspace``). A ``..`` step that leaves the
directory, even to come back into it, counts as leaving: through a symlinked component the
kernel would resolve it somewhere else. With ``resolve_symlinks`` the path is resolved as written
(``realpath`` follows a ``..`` after a symlink as the kernel does), not its lexical normal form.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from assay.policy.fileuri import FileUriRefused, is_file_uri, read_file_uri

__all__ = [
    "PathRefused",
    "path_from_argument",
    "normalize_path",
    "is_inside",
    "confinement_violation",
]

_ECHO_MAX = 200


class PathRefused(ValueError):
    """A path argument that has no usable normal form; ``str(e)`` says why."""


def _quote(value: str) -> str:
    text = value if len(value) <= _ECHO_MAX else value[:_ECHO_MAX] + "..."
    return json.dumps(text)


def path_from_argument(value: str) -> str:
    """The path a path argument names: a ``file:`` URI (as a URL parser recognizes one) read by
    :func:`~assay.policy.fileuri.read_file_uri`, anything else as given."""
    if not is_file_uri(value):
        return value
    try:
        return read_file_uri(value)
    except FileUriRefused as exc:
        raise PathRefused(str(exc)) from None


def _absolute(path: str, base: str | None) -> str:
    """``path`` checked and made absolute (joined to ``base``), not yet normalized."""
    if path == "":
        raise PathRefused("empty path")
    if "\x00" in path:
        raise PathRefused("embedded null byte")
    if path.startswith("~"):
        raise PathRefused("home-relative paths (~) are not allowed")
    if not path.startswith("/"):
        if base is None:
            raise PathRefused("relative path and no base directory is configured")
        path = base + "/" + path
    return path


def _components(path: str) -> tuple[list[str], int]:
    """Normal-form components of an absolute path, and the fewest components left after any
    ``..`` step (the leave check: a path that climbs to depth d at some point has left every
    deeper directory)."""
    parts: list[str] = []
    lowest = 1 << 30
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise PathRefused("'..' climbs above /")
            parts.pop()
            lowest = min(lowest, len(parts))
            continue
        parts.append(segment)
    return parts, lowest


def normalize_path(path: str, base: str | None = None) -> str:
    """The lexical normal form of ``path`` (absolute, no ``.``/``..``, single slashes).

    Raises :class:`PathRefused` for an empty path, a NUL byte, a leading ``~``, a relative path
    without ``base``, or a ``..`` above ``/``.
    """
    parts, _ = _components(_absolute(path, base))
    return "/" + "/".join(parts)


def is_inside(path: str, directory: str) -> bool:
    """Component-boundary containment of two normal forms."""
    if directory == "/":
        return path.startswith("/")
    return path == directory or path.startswith(directory + "/")


def _inside_parts(parts: list[str], root: list[str]) -> bool:
    return len(parts) >= len(root) and parts[: len(root)] == root


def confinement_violation(
    value: Any,
    *,
    within: Iterable[str],
    base: str | None = None,
    resolve_symlinks: bool = False,
    realpath: Callable[[str], str] = os.path.realpath,
) -> str | None:
    """``None`` when ``value`` (one path argument) is confined to ``within``, else why not.

    ``within`` holds normal forms (the loader normalizes them). A list is checked item by item;
    anything but a string or a list of strings is a violation.
    """
    roots = tuple(within)
    if isinstance(value, list):
        for index, item in enumerate(value):
            why = confinement_violation(
                item, within=roots, base=base, resolve_symlinks=resolve_symlinks, realpath=realpath
            )
            if why is not None:
                return f"item {index}: {why}"
        return None
    if not isinstance(value, str):
        return "not a string"
    try:
        path = _absolute(path_from_argument(value), base)
        parts, lowest = _components(path)
    except PathRefused as exc:
        return f"{_quote(value)}: {exc}"
    normal = "/" + "/".join(parts)
    root_parts = {root: [p for p in root.split("/") if p] for root in roots}
    climbed_out = None
    for root in roots:
        rp = root_parts[root]
        if not _inside_parts(parts, rp):
            continue
        # every `..` step must stay at or below the root: with the final form inside the root,
        # a step that never went above its depth cannot have left it
        if lowest < len(rp):
            climbed_out = climbed_out or root
            continue
        if resolve_symlinks:
            try:
                real = realpath(path)  # as written: a `..` after a symlink goes where the kernel goes
                real_root = realpath(root)
            except (OSError, ValueError):
                return f"{_quote(value)}: cannot resolve symlinks"
            if not is_inside(real, real_root):
                continue
        return None
    shown = ", ".join(roots)
    if climbed_out is not None:
        return f"{_quote(value)}: '..' leaves {climbed_out} on the way"
    if resolve_symlinks:
        return f"{_quote(value)} resolves outside {shown}"
    if normal != value:
        return f"{_quote(value)} (normalized {_quote(normal)}) is outside {shown}"
    return f"{_quote(value)} is outside {shown}"
