"""Text meant for a terminal (docs/compatibility.md, "Whole toolkit"): whatever a server, a
client or a file put in a name or a reason, it reaches the terminal printable."""

from __future__ import annotations

__all__ = ["printable", "printable_json"]


def printable(text: object) -> str:
    """``text`` with each character that is not printable (controls, escapes, line and
    paragraph separators, lone surrogates) shown as its Python escape (``\\x1b``, ``\\n``)."""
    value = "" if text is None else str(text)
    if value.isprintable():
        return value
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii") for c in value
    )


def printable_json(text: str) -> str:
    """JSON text as an encoder wrote it, with each character :func:`printable` would escape
    (DEL, C1 controls, bidi and other format controls, U+2028/U+2029, lone surrogates, ...)
    written as a JSON ``\\uXXXX`` escape instead (a UTF-16 pair above U+FFFF): the same value
    for every JSON reader, and nothing in it a terminal or a JavaScript reader acts on. Such a
    character can only stand inside a string (JSON's own syntax is ASCII, and an encoder escapes
    the C0 controls), where the escape means the same character."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
            continue
        code = ord(c)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)
