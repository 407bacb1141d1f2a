"""One-line error reporting shared by every command (docs/compatibility.md, "Whole toolkit")."""

from __future__ import annotations

import re
import sys

_WS = re.compile(r"\s*\n\s*")


class UsageError(Exception):
    """A bad flag or value found after parsing; reported as `assay: error: ...`, exit 2."""


class Fatal(Exception):
    """A failure of the work itself, not of the command line (a file that cannot be read or
    loaded, a server that died, a write that failed): reported as `fatal: ...` with the exit
    code the command documents (README.md, "Commands"; default 2)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def one_line(exc: BaseException | str) -> str:
    """Collapse a message onto one line (cyclopts and OS messages can span several)."""
    text = str(exc).strip()
    return _WS.sub(" ", text) or type(exc).__name__


def fatal(message: str, code: int = 2) -> int:
    """Print `fatal: <message>` on one line to stderr and return ``code``."""
    sys.stderr.write(f"fatal: {one_line(message)}\n")
    return code
