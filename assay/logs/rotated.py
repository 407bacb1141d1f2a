"""The names of rotated log files (docs/wrap.md, "Log rotation"): what wrap renames a full
decision or audit log to, and how a reader knows a log's rotated files. Sans-IO: names in,
names out; the time is given.

A log ``DIR/x.decisions.ndjson`` that reached its size is renamed to
``DIR/x.decisions.<UTC time>.ndjson`` (``20261203T142749Z``, then ``-1``, ``-2`` ... when that
name is taken): the stamp goes before the last extension, so a rotated file of a ``.ndjson`` log
is a ``.ndjson`` file too, and a directory read by ``assay mcp log`` takes both. A log without
an extension gets the stamp at the end (``x.log`` -> ``x.<stamp>.log``, ``x`` -> ``x.<stamp>``).
"""

from __future__ import annotations

import os
import re
import time
from typing import Final

__all__ = ["rotated_name", "is_rotated_of", "split_name", "sequence_key"]

_STAMP: Final = re.compile(r"\d{8}T\d{6}Z(?:-[1-9]\d{0,8})?")
_ROTATED: Final = re.compile(r"(?P<root>.+)\.(?P<stamp>\d{8}T\d{6}Z)(?:-(?P<n>[1-9]\d{0,8}))?(?P<ext>(?:\.[^.]*)?)")


def split_name(name: str) -> tuple[str, str]:
    """``name`` (a file name, no directory) as (the part before the stamp, the extension)."""
    root, ext = os.path.splitext(name)
    return (root, ext) if root else (name, "")


def rotated_name(path: str, when: float, n: int = 0) -> str:
    """The name ``path`` is renamed to when it is rotated at ``when`` (seconds since the epoch);
    ``n`` > 0 when the names before it were taken."""
    head, name = os.path.split(path)
    root, ext = split_name(name)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when)) + (f"-{n}" if n else "")
    return os.path.join(head, f"{root}.{stamp}{ext}")


def is_rotated_of(name: str, current: str) -> bool:
    """Whether the file name ``name`` is one :func:`rotated_name` gives the log named
    ``current`` (both file names, no directory)."""
    root, ext = split_name(current)
    if not (name.startswith(root + ".") and name.endswith(ext)) or len(name) <= len(root) + 1 + len(ext):
        return False
    return _STAMP.fullmatch(name[len(root) + 1 : len(name) - len(ext)]) is not None


def sequence_key(name: str) -> tuple[str, tuple[str, int]]:
    """Which log a file name belongs to and its place among that log's files: (the name of the
    log, (stamp, n)) for a rotated file, (its own name, the place after every rotated one) for
    a current log. The files of one log, sorted by place, are in the order they were written."""
    found = _ROTATED.fullmatch(name)
    if found is None or split_name(found["root"] + found["ext"])[1] != found["ext"]:
        return name, ("~", 0)
    return found["root"] + found["ext"], (found["stamp"], int(found["n"] or 0))
