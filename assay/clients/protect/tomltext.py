"""TOML text as protect reads and writes it (docs/protect.md, "Formatting and comments"): a
string spelled as a TOML basic string, the text with its comments blanked, where a member added
after a value's line goes. Sans-IO; a leaf of the protect package."""

from __future__ import annotations

__all__ = ["blank_toml_comments", "line_anchor", "toml_string"]


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string (control characters and DEL escaped)."""
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def blank_toml_comments(text: str) -> str:
    """``text`` with its ``#`` comments turned into spaces (strings kept), same length."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            triple = text.startswith(c * 3, i)
            quote = c * 3 if triple else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if c == '"' and text[j] == "\\":
                    j += 1
                elif not triple and text[j] == "\n":
                    break
                j += 1
            j = min(n, j + len(quote))
            while triple and j < n and text[j] == c:  # """a"""" ends with a quote inside
                j += 1
            out.append(text[i:j])
            i = j
            continue
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def line_anchor(text: str, end: int) -> tuple[int, str]:
    """Where a member added after the line of a value ending at ``end`` goes (before that
    line's end of line), and the end of line to put before it."""
    j = text.find("\n", end)
    if j < 0:
        return len(text), "\r\n" if "\r\n" in text else "\n"
    if j > 0 and text[j - 1] == "\r":
        return j - 1, "\r\n"
    return j, "\n"
