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

Regenerate the module after changing a command's help: ``python -m assay.cli.help_fast --write``.
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


def render(tokens: Sequence[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``assay <tokens>`` through cyclopts, the fast paths off,
    in a child with no terminal and rich's width and colour variables unset."""
    import subprocess
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                        "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONIOENCODING"] = "utf-8"
    code = ("import sys; from assay.cli.app import main; "
            "sys.exit(main(sys.argv[1:], fast_help=False))")
    done = subprocess.run([sys.executable, "-c", code, *tokens], stdin=subprocess.DEVNULL,
                          capture_output=True, env=env, timeout=120, start_new_session=True)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def generate() -> str:
    """The source of :mod:`assay.cli._helptext` for the live command tree."""
    pages: dict[str, str] = {}
    for tokens, key in LINES.items():
        code, out, err = render(tokens)
        if code != 0 or err:
            raise SystemExit(f"assay {' '.join(tokens)}: exit {code}, stderr {err!r}")
        if pages.setdefault(key, out) != out:
            raise SystemExit(f"assay {' '.join(tokens)}: not the same page as the other {key!r} lines")
    body = "".join(f"    {key!r}: (\n{_lines(text)}    ),\n" for key, text in pages.items())
    return (
        '"""Generated by `python -m assay.cli.help_fast --write`: do not edit.\n\n'
        "The help pages cyclopts renders at 80 columns, plain; assay.cli.help_fast prints them.\n"
        '"""\n\nPAGES: dict[str, str] = {\n' + body + "}\n"
    )


def _lines(text: str) -> str:
    return "".join(f"        {line!r}\n" for line in text.splitlines(keepends=True))


if __name__ == "__main__":  # pragma: no cover - the maintainer's regeneration entry
    from pathlib import Path

    if sys.argv[1:] == ["--write"]:
        Path(__file__).with_name("_helptext.py").write_text(generate(), encoding="utf-8")
    else:
        sys.stdout.write(generate())
