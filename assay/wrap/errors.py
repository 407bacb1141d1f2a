"""The fatal error of a wrap run (a leaf: :mod:`assay.wrap.run` and :mod:`assay.wrap.remote`
raise it, the CLI prints it)."""

from __future__ import annotations

__all__ = ["WrapError"]


class WrapError(Exception):
    """A fatal wrap error: reported as one `fatal: ...` line, exit 2.

    See docs/wrap.md, "Exit status"."""
