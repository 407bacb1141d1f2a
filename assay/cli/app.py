"""The cyclopts command tree: `assay mcp <command>` (the command table of README.md).

Each command family lives in its own module with a ``register(app, mcp)`` function. Errors a
user causes end with one line on stderr and exit 2, cyclopts' own parse errors included
(``assay: error: ...``, :class:`~assay.cli.errors.UsageError`); a failure of the work itself is
one ``fatal: ...`` line with the command's exit code (:class:`~assay.cli.errors.Fatal`);
tracebacks never reach the user.

Start-up (docs/testing.md, "Start-up of --version and --help"): three kinds of line never import cyclopts or rich. A plain
`assay mcp wrap ... -- <command>` line is read by :func:`assay.cli.wrap_args.parse_fast`
(start-up time is part of every wrapped server's start); `assay --version` prints the version;
the top-level and `assay mcp` help pages come from :mod:`assay.cli.help_fast` when they would be
printed as plain 80-column text. Everything else, every other help page and usage errors
included, goes through cyclopts.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from assay.cli.errors import Fatal, UsageError, fatal, one_line

if TYPE_CHECKING:
    import cyclopts


# The hidden deprecated top-level forms: `assay tool` is `assay mcp tool`, and so on. Each
# module names its warning (SHIM_WARNING); main prints it before anything is parsed.
SHIMS = ("tool", "discover", "kill")


def build() -> cyclopts.App:
    import cyclopts

    from assay._version import __version__
    from assay.cli import _families

    app = cyclopts.App(
        name="assay",
        help="Policy guard between AI agents and the MCP tools they call.",
        version=f"assay {__version__}",
        version_format="plaintext",
        help_format="plaintext",
        result_action="return_value",
    )
    mcp = cyclopts.App(name="mcp", help="MCP runtime commands.", help_format="plaintext")
    app.command(mcp)
    for family in _families.FAMILIES:
        family.register(app, mcp)
    return app


def main(argv: list[str] | None = None, *, fast_wrap: bool = True, fast_help: bool = True) -> int:
    """Run one `assay` command line; returns the exit status. ``fast_wrap=False`` sends a wrap
    line through cyclopts too (tests/test_wrap_args.py compares the two parsers);
    ``fast_help=False`` does the same for `--version` and the committed help pages
    (tests/test_help_fast.py)."""
    tokens = sys.argv[1:] if argv is None else argv
    if tokens[:2] == ["mcp", "wrap"] and not {"-h", "--help"} & set(tokens[2 : _dash(tokens)]):
        # docs/wrap.md, "Command line": every token before `--` is a wrap option or its value,
        # and the server command comes after it, so nothing of it is ever taken for the other.
        if "--" not in tokens and not any(t == "--url" or t.startswith("--url=") for t in tokens[2:]):
            sys.stderr.write(
                "assay: error: give the MCP server command after -- (or a remote server with --url): "
                "assay mcp wrap [OPTIONS] -- <command> [args...]\n"
            )
            return 2
        import gc

        # docs/testing.md, "Start-up of `assay mcp wrap`": no cyclic garbage collection while
        # wrap imports what it runs (wrap_args.launch resumes it before the run starts)
        collecting = gc.isenabled()
        gc.disable()
        # docs/wrap.md, "The code cache": the code the imports generate, from the state
        # directory's cache (wrap_args.launch closes the window before the run starts)
        from assay.wrap import codecache

        named, state_dir = _state_dir_of(tokens[2 : _dash(tokens)])
        if named:
            import os

            codecache.open_window(state_dir, os.environ)
        try:
            from assay.cli import wrap_args
        except BaseException:
            codecache.close_window()
            if collecting:
                gc.enable()
            raise
        wrap_args.gc_paused = collecting
        try:
            parsed = wrap_args.parse_fast(tokens[2:]) if fast_wrap else None
            if parsed is not None:
                try:
                    return wrap_args.run(*parsed)
                except UsageError as exc:
                    sys.stderr.write(f"assay: error: {one_line(exc)}\n")
                    return 2
                except KeyboardInterrupt:
                    return 130
        finally:
            codecache.close_window()
            wrap_args.gc_paused = False
            if collecting:
                gc.enable()
    elif fast_help:  # docs/testing.md, "Start-up of --version and --help"
        if tokens == ["--version"]:
            from assay._version import __version__

            sys.stdout.write(f"assay {__version__}\n")
            return 0
        from assay.cli import help_fast

        text = help_fast.page(tokens)
        if text is not None:
            sys.stdout.write(text)
            return 0
    if tokens and tokens[0] in SHIMS:
        # docs/tool-signing.md, "Deprecated spelling"; docs/discover.md and docs/kill.md,
        # "Deprecated flat form": the warning comes first on every use, help and usage errors too.
        import importlib

        warning: str = importlib.import_module(f"assay.cli.{tokens[0]}").SHIM_WARNING
        sys.stderr.write(warning.rstrip("\n") + "\n")
        sys.stderr.flush()
    from assay.cli import dash

    dash.AFTER = tokens[_dash(tokens) + 1 :] if "--" in tokens else None
    import cyclopts

    app = build()
    try:
        result = app(tokens, exit_on_error=False, print_error=False)
    except cyclopts.CycloptsError as exc:
        sys.stderr.write(f"assay: error: {one_line(exc)}\n")
        return 2
    except UsageError as exc:
        sys.stderr.write(f"assay: error: {one_line(exc)}\n")
        return 2
    except Fatal as exc:
        return fatal(str(exc), exc.code)
    except KeyboardInterrupt:
        return 130
    if result is None:
        return 0
    if isinstance(result, bool):
        return 0 if result else 1
    if isinstance(result, int):
        return result
    return 0


def _state_dir_of(options: list[str]) -> tuple[bool, str | None]:
    """(whether the state directory is known, the ``--state-dir`` value or None) from a wrap
    line's options before they are parsed: known when the line gives ``--state-dir`` with its
    value once, or never (then the environment's is the one); a line it cannot tell about
    (``--state-dir=...``, given twice, no value) gets its cache window once parsed."""
    given = [i for i, token in enumerate(options) if token.startswith("--state-dir")]
    if not given:
        return True, None
    if len(given) == 1 and options[given[0]] == "--state-dir" and given[0] + 1 < len(options):
        return True, options[given[0] + 1]
    return False, None


def _dash(tokens: list[str]) -> int:
    return tokens.index("--") if "--" in tokens else len(tokens)


def entry() -> None:
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    sys.exit(code)
