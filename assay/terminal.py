"""Text meant for a terminal (docs/compatibility.md, "Whole toolkit"): whatever a server, a
client or a file put in a name or a reason, it reaches the terminal printable."""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: object) -> str:
    """``text`` with each character that is not printable (controls, escapes, line and
    paragraph separators, lone surrogates) shown as its Python escape (``\\x1b``, ``\\n``)."""
    value = "" if text is None else str(text)
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in value)
