"""Writing to the terminal, shared by the commands that print tables (docs/compatibility.md,
"Whole toolkit"): text read from a file or a server is shown printable, and a reader that went
away (`| head`) ends the output quietly."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from assay.terminal import printable

__all__ = ["aligned", "local_time", "printable", "write_out"]


def write_out(text: str, *, flush: bool = True) -> bool:
    """Write ``text`` to stdout; False (and stdout pointed at /dev/null, so the exit's flush
    raises nothing either) when the reader went away."""
    try:
        sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
        return True
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False


def aligned(rows: Iterable[Sequence[str]]) -> list[str]:
    """Rows of cells (the head first) as lines of columns two spaces apart, each as wide as its
    widest cell; no trailing spaces."""
    lines = [list(row) for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))] if lines else []
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]


def local_time(stamp: Any) -> str:
    """A Unix time as ``YYYY-MM-DD HH:MM:SS`` in local time; ``?`` for what is not one."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"
