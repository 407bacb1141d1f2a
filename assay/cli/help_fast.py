"""`assay --help` and `assay mcp --help` without importing cyclopts (docs/testing.md, "Start-up of --version and --help").

cyclopts and rich cost ~200 ms of start-up on the 2-core dev machine, more than the rest of a
help line together. The two help pages a user reaches first (`assay`, `assay --help`, `assay -h`;
`assay mcp`, `assay mcp --help`, `assay mcp -h`) are kept, as cyclopts renders them, in the
generated module :mod:`assay.cli._helptext`, and :func:`page` gives that text when the output
would be exactly that text: plain (not a terminal, no forced colour) and 80 columns wide, the
width rich uses when no terminal and no ``COLUMNS`` say otherwise. A terminal at least 80
columns wide gets the same page too (cyclopts would draw its boxes to the terminal's width and
add colour: the same words). Anywhere else (a narrower terminal or output, forced colour) the
caller goes through cyclopts.

Regenerate the module after changing a command's help: ``python -m tests.helptext --write``
(the generator lives with the tests: it runs cyclopts in a child process).
tests/test_help_fast.py fails while the committed text differs from what cyclopts renders from
the live command tree.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# The command lines whose output is a committed page, and the page's key in _helptext.PAGES.
LINES: dict[tuple[str, ...], str] = {
    (): "root",
    ("--help",): "root",
    ("-h",): "root",
    ("mcp",): "mcp",
    ("mcp", "--help"): "mcp",
    ("mcp", "-h"): "mcp",
}
WIDTH = 80


def page(tokens: Sequence[str]) -> str | None:
    """The committed help text ``tokens`` print on stdout (exit 0), or ``None`` when cyclopts
    must render it (another command line, or output that is not plain text 80 columns wide)."""
    key = LINES.get(tuple(tokens))
    if key is None or not plain_width(os.environ, sys.stdout) == WIDTH:
        return None
    from assay.cli import _helptext

    return _helptext.PAGES[key]


def plain_width(environ: Mapping[str, str], stdout: object) -> int | None:
    """The width rich prints help at when that output is plain text (for a terminal at least
    :data:`WIDTH` wide: :data:`WIDTH`, the page shown as it is), else ``None``.

    The decision of ``rich.console.Console`` for a console on stdout: ``TTY_COMPATIBLE`` and
    ``FORCE_COLOR`` can make it a terminal (then ``None``, as for a stdout that is a terminal);
    a non-UTF encoding swaps the panel's box characters for ASCII (``None``); the width is the
    first of stdin, stdout, stderr that is a terminal, overridden by a numeric ``COLUMNS``,
    and 80 when neither says.
    """
    if "TTY_COMPATIBLE" in environ or "FORCE_COLOR" in environ:
        return None
    isatty = getattr(stdout, "isatty", None)
    try:
        terminal = isatty is None or bool(isatty())
    except ValueError:
        return None
    encoding = getattr(stdout, "encoding", None) or "utf-8"
    if not encoding.lower().startswith("utf"):
        return None
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (OSError, ValueError):
            continue
        break
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    if terminal:
        # a terminal at least as wide as the page gets the page as it is, without rich's
        # colours and at 80 columns (what cyclopts would draw wider): the same words, at once
        return WIDTH if isatty is not None and width >= WIDTH else None
    return width or WIDTH
