"""Writing to the terminal, shared by the commands that print tables (docs/compatibility.md,
"Whole toolkit"): text read from a file or a server is shown printable, and a reader that went
away (`| head`) ends the output quietly."""

from __future__ import annotations

import os
import sys

from assay.terminal import printable

__all__ = ["printable", "write_out"]


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
