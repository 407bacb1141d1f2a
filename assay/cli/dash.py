"""The words after ``--`` on the command line being run (set by :func:`assay.cli.app.main`).

cyclopts keeps the tokens after ``--`` among a command's positional values but drops the ``--``
itself, so a command that takes ``-- <command> [args...]`` (wrap, tools) reads here whether
there was one and what followed it: ``None`` when the line had no ``--``.
"""

from __future__ import annotations

AFTER: list[str] | None = None


def given(positional: tuple[str, ...]) -> bool:
    """Whether ``positional`` (a command's collected positional words) is what followed ``--``."""
    return (
        AFTER is not None
        and list(positional[len(positional) - len(AFTER) :]) == AFTER
        and len(positional) >= len(AFTER)
    )
