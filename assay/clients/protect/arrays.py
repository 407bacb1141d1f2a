"""The text of the values protect writes (docs/protect.md, "Formatting and comments"): strings
and ``args`` arrays in JSON or TOML, laid out like the text they replace. Sans-IO.

A wrapped ``args`` array keeps the original items' text as it was (quotes, comments between
them, a trailing comma): the wrap options and the original command are put in front of the
first item, with the separator and indentation the array already uses."""

from __future__ import annotations

import json
from collections.abc import Sequence

from assay.clients.protect.tomltext import toml_string

__all__ = ["render_string", "array_items", "prepend_items", "render_array"]


def render_string(value: str, toml: bool) -> str:
    return toml_string(value) if toml else json.dumps(value, ensure_ascii=False)


def _string_end(s: str, i: int) -> int:
    """The end of the string literal (JSON or TOML) starting at ``s[i]``."""
    c = s[i]
    quote = c * 3 if s.startswith(c * 3, i) else c
    j = i + len(quote)
    while j < len(s) and not s.startswith(quote, j):
        j += 2 if c == '"' and s[j] == "\\" else 1
    j += len(quote)
    while len(quote) == 3 and j < len(s) and s[j] == c:
        j += 1
    return min(j, len(s))


def array_items(scan: str) -> list[tuple[int, int]]:
    """The spans of the string items of an array's text with comments blanked (``scan`` starts
    with ``[``); other values end the walk (protect only edits arrays of strings)."""
    items: list[tuple[int, int]] = []
    i = 1
    while i < len(scan):
        c = scan[i]
        if c in " \t\r\n,":
            i += 1
        elif c in "\"'":
            end = _string_end(scan, i)
            items.append((i, end))
            i = end
        else:
            break
    return items


def prepend_items(original: str, scan: str, tokens: Sequence[str]) -> str | None:
    """``original`` (an array's text) with ``tokens`` (rendered strings) before its first item,
    laid out as its items are; None when it has no items."""
    items = array_items(scan)
    if not items:
        return None
    first = items[0][0]
    line_start = scan.rfind("\n", 0, first) + 1
    if line_start > 0 and not scan[line_start:first].strip():
        eol = "\r\n" if scan[line_start - 2 : line_start] == "\r\n" else "\n"
        sep = "," + eol + scan[line_start:first]  # one item a line: the first item's indentation
    else:
        sep = ", "
        if len(items) > 1:
            between = scan[items[0][1] : items[1][0]]
            if between.strip() == "," and "\n" not in between:
                sep = between
    return original[:first] + "".join(t + sep for t in tokens) + original[first:]


def render_array(
    values: Sequence[str],
    toml: bool,
    *,
    like: str | None = None,
    indent: str | None = None,
    close: str = "",
    eol: str = "\n",
) -> str:
    """``values`` as an array: laid out like the array text ``like`` (comments blanked) when
    given, else one item a line with ``indent`` (and ``close`` before the bracket), else on
    one line."""
    rendered = [render_string(v, toml) for v in values]
    if not rendered:
        return "[]"
    if like is not None:
        indent = None
        items = array_items(like)
        if "\n" in like and items:
            first = items[0][0]
            line_start = like.rfind("\n", 0, first) + 1
            close_line = like.rfind("\n", 0, len(like) - 1)
            item_indent, close_indent = like[line_start:first], like[close_line + 1 : len(like) - 1]
            if line_start > 0 and not item_indent.strip() and not close_indent.strip():
                indent, close = item_indent, close_indent
                eol = "\r\n" if like[line_start - 2 : line_start] == "\r\n" else "\n"
        elif "\n" not in like:
            inner = like[1:-1]
            sep = ", "
            if len(items) > 1 and like[items[0][1] : items[1][0]].strip() == ",":
                sep = like[items[0][1] : items[1][0]]
            pad = " " if inner.startswith(" ") and inner.strip() else ""
            return "[" + pad + sep.join(rendered) + pad + "]"
    if indent is not None:
        return "[" + eol + ("," + eol).join(indent + r for r in rendered) + eol + close + "]"
    return "[" + ", ".join(rendered) + "]"
