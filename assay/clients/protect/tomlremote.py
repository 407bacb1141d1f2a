"""A Codex CLI remote entry rewritten whole (docs/protect.md, "Remote servers"): the body of its
``[mcp_servers.NAME]`` table, member by member. The ``url`` line becomes the ``command`` and
``args`` lines, the ``http_headers`` inline table becomes an ``env`` one holding the header
values' own text; every other line stays as it is. An entry in another form (an inline table,
dotted keys, a sub-table) is left as is, and said so. Sans-IO."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from typing import Any

from assay.clients.protect.arrays import _string_end, render_array
from assay.clients.protect.model import HOLE, Remote, Slot
from assay.clients.protect.tomltext import blank_toml_comments, toml_string
from assay.clients.protect.wrapline import header_env

__all__ = ["toml_entry", "body_span"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
# Codex reads these from its own environment (docs/protect.md, "Remote servers"): the wrapped
# entry gets the variables they name through env_vars, and wrap reads them there
_FORWARDED = ("env_http_headers", "bearer_token_env_var")
_LEFT = "its table form (a [mcp_servers.NAME] table of key = value lines) is not the one protect rewrites; left as is"


def _header_path(line: str) -> list[str] | None:
    """The key path of a ``[table]`` header line, or None."""
    try:
        doc: Any = tomllib.loads(line)
    except ValueError:
        return None
    path: list[str] = []
    while isinstance(doc, dict) and len(doc) == 1:
        key = next(iter(doc))
        path.append(key)
        doc = doc[key]
    return path if doc == {} else None


def _body(text: str, scan: str, servers_key: str, name: str) -> tuple[int, int] | str:
    """The span of the body of ``[servers_key.name]``: after its header line, up to the next
    header line. A sub-table of the entry: a reason."""
    starts = [0] + [m.end() for m in re.finditer("\n", scan)]
    body: tuple[int, int] | None = None
    open_at: int | None = None
    for at in starts:
        line_end = scan.find("\n", at)
        line = scan[at : len(scan) if line_end < 0 else line_end]
        if not line.lstrip().startswith("["):
            continue
        path = None if line.lstrip().startswith("[[") else _header_path(line.strip())
        if open_at is not None and body is None:
            body = (open_at, at)
        if path is not None and path[:2] == [servers_key, name]:
            if len(path) > 2:
                return f"it has a sub-table [{'.'.join(path)}]; " + _LEFT
            open_at = len(scan) if line_end < 0 else line_end + 1
    if open_at is None:
        return _LEFT
    return body or (open_at, len(scan))


def body_span(text: str, scan: str, servers_key: str, name: str) -> tuple[int, int] | None:
    """The span of the body of the ``[servers_key.name]`` table (what undo of a remote entry
    matches), or None."""
    got = _body(text, scan, servers_key, name)
    return None if isinstance(got, str) else got


def _members(text: str, scan: str, span: tuple[int, int]) -> list[tuple[str, int, int]] | str:
    """``(key, start, end)`` of every member of a table body (a member ends at the end of its
    last line, before the line break)."""
    out: list[tuple[str, int, int]] = []
    at, end = span

    def line_stop(i: int) -> int:
        """The end of the line at ``i``, before its line break (LF or CRLF)."""
        j = scan.find("\n", i, end)
        j = end if j < 0 else j
        return j - 1 if j > i and scan[j - 1] == "\r" else j

    def next_line(stop: int) -> int:
        return stop + (2 if scan.startswith("\r\n", stop) else 1)

    while at < end:
        stop = line_stop(at)
        if not scan[at:stop].strip():
            at = next_line(stop)
            continue
        chunk_end = stop
        while True:
            try:
                value = tomllib.loads(text[at:chunk_end])
                break
            except ValueError:
                if next_line(chunk_end) >= end:
                    return _LEFT
                chunk_end = line_stop(next_line(chunk_end))
        if len(value) != 1:
            return _LEFT
        out.append((next(iter(value)), at, chunk_end))
        at = next_line(chunk_end)
    return out


def _inline_values(text: str, start: int, end: int) -> list[tuple[int, int]] | None:
    """The spans of the string values of the inline table ``key = { k = "v", ... }`` in
    ``text[start:end]``, in order; None when it is not such a table of strings."""
    i = text.find("=", start, end) + 1
    while i < end and text[i] in " \t":
        i += 1
    if i <= 0 or text[i : i + 1] != "{":
        return None
    i += 1
    spans: list[tuple[int, int]] = []
    while True:
        while i < end and text[i] in " \t,":
            i += 1
        if text[i : i + 1] == "}":
            return spans
        while i < end and text[i] not in "=":  # the key (bare, quoted or dotted)
            i = _string_end(text, i) if text[i] in "\"'" else i + 1
        i += 1
        while i < end and text[i] in " \t":
            i += 1
        if i >= end or text[i] not in "\"'":
            return None
        j = _string_end(text, i)
        spans.append((i, j))
        i = j


def toml_entry(
    text: str, slot: Slot, remote: Remote
) -> tuple[tuple[int, int], str, dict[int, str], Callable[[str, list[str]], str]] | str:
    """``(span of the body, original template, hole texts, render(assay, args) -> written
    template)`` of a Codex remote entry, or the reason it is left as is."""
    scan = blank_toml_comments(text)
    span = _body(text, scan, slot.map[0], slot.name)
    if isinstance(span, str):
        return span
    members = _members(text, scan, span)
    if isinstance(members, str):
        return members
    holes: dict[int, str] = {}
    cuts: list[tuple[int, int]] = []
    for key, s, e in members:
        if key == "http_headers" and remote.headers:
            found = _inline_values(text, s, e)
            if found is None or len(found) != len(remote.headers):
                return 'its "http_headers" is not one inline table of strings; ' + _LEFT
            cuts = found
            holes = {n: text[a:b] for n, (a, b) in enumerate(found, 1)}
    original = text[span[0] : span[1]]
    for n, (a, b) in sorted(enumerate(cuts, 1), key=lambda c: c[1][0], reverse=True):
        original = original[: a - span[0]] + f"{HOLE}{n}{HOLE}" + original[b - span[0] :]
    eol = "\r\n" if "\r\n" in text[span[0] : span[1]] else "\n"
    # Codex's variables: the first of these members becomes the entry's env_vars, the others go
    forwarding = [key for key, _, _ in members if key in _FORWARDED]

    def render(assay: str, args: list[str]) -> str:
        out, last = [], span[0]
        for key, s, e in members:
            out.append(text[last:s])
            indent = text[s : s + len(text[s:e]) - len(text[s:e].lstrip(" \t"))]
            if key == remote.url_key:
                out.append(f"command = {toml_string(assay)}{eol}{indent}args = {render_array(args, True)}")
            elif key == "http_headers":
                pairs = ", ".join(f"{header_env(n)} = {HOLE}{n}{HOLE}" for n in range(1, len(holes) + 1))
                out.append(f"env = {{ {pairs} }}" if pairs else "env = {}")
            elif key in _FORWARDED and key == forwarding[0]:
                out.append(f"env_vars = {render_array(remote.forwarded, True)}")
            elif key not in ("type", "transport", *_FORWARDED):
                out.append(text[s:e])
            else:
                last = e + len(eol) if text[e : e + len(eol)] == eol else e  # the line goes
                continue
            last = e
        out.append(text[last : span[1]])
        return "".join(out)

    return span, original, holes, render
