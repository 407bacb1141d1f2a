"""What protect shows of a config's text (docs/protect.md, "Output and exit codes"): the diff of
``--dry-run`` with every value that protect never prints cut out.

Those values are the ones clients keep secrets in: every string inside a server entry's
``headers`` (``http_headers`` and ``env_http_headers`` in Codex), ``env``, and Codex's
``bearer_token``; in Zed's older form also ``command.env``. Each is replaced, where it sits, by
:data:`HIDDEN` (a string literal of the file's own syntax), in the text before and after the edit
alike, so the diff shows which lines change and never what such a value holds. The values are
found by their place in the parsed file, never by their text, so a value that also appears
elsewhere is not guessed at, and a value nobody could guess is still hidden. Sans-IO.
"""

from __future__ import annotations

import difflib
import secrets
from collections.abc import Iterator
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.protect.jsonspans import _Node, _parse_json
from assay.clients.protect.model import ProtectError

__all__ = ["HIDDEN", "HIDDEN_MEMBERS", "masked", "shown_diff"]

HIDDEN = '"<hidden>"'
#: The members of a server entry whose strings protect never prints.
HIDDEN_MEMBERS = ("headers", "http_headers", "env_http_headers", "env", "bearer_token")


def _strings(node: _Node) -> Iterator[_Node]:
    """Every string node inside ``node`` (itself included)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if item.members is not None:
            stack.extend(n for _, n in item.members.values())
        elif item.items is not None:
            stack.extend(item.items)
        elif isinstance(item.value, str):
            yield item


def _json_spans(text: str, location: ConfigLocation) -> list[tuple[int, int]]:
    from assay.clients.protect.slots import _json_maps

    bom = 1 if text.startswith("\ufeff") else 0
    _, root = _parse_json(text[bom:], location.jsonc)
    spans: list[tuple[int, int]] = []
    for _path, table in _json_maps(root, location):
        for _key, (_at, entry) in (table.members or {}).items():
            holders = [entry]
            command = (entry.members or {}).get("command")
            if command is not None and command[1].members is not None:
                holders.append(command[1])  # Zed's older form: "command": {"path", "args", "env"}
            for holder in holders:
                for name in HIDDEN_MEMBERS:
                    member = (holder.members or {}).get(name)
                    if member is not None:
                        spans += [(s.start + bom, s.end + bom) for s in _strings(member[1])]
    return spans


def _toml_strings(item: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``(key path, item)`` of every string item inside the tomlkit ``item``."""
    from tomlkit.items import Array, String

    if isinstance(item, String):
        yield path, item
    elif isinstance(item, dict):
        for key in list(item.keys()):
            yield from _toml_strings(item[key], path + (key,))
    elif isinstance(item, Array):
        for i, sub in enumerate(item):
            yield from _toml_strings(sub, path + (str(i),))


def _toml_spans(text: str, location: ConfigLocation) -> list[tuple[int, int]]:
    """The spans of the hidden strings of a TOML config: each is swapped for a unique marker in a
    copy of the document, which tomlkit writes back byte for byte around the markers (as
    :func:`assay.clients.protect.tomlspans.toml_slots` finds ``command`` and ``args``)."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from assay.clients.protect.tomlspans import _quoted

    try:
        doc = tomlkit.parse(text)
        marked = tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise ProtectError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ProtectError("invalid TOML: nested too deeply") from None
    table = doc.get(location.servers_key)
    if not isinstance(table, dict):
        return []
    token = secrets.token_hex(8)
    while token in text:
        token = secrets.token_hex(8)
    wanted: list[tuple[str, str]] = []  # marker, the value's own text
    for name in list(table.keys()):
        entry = table[name]
        if not isinstance(entry, dict):
            continue
        for key in HIDDEN_MEMBERS:
            if key not in entry:
                continue
            for path, item in list(_toml_strings(entry[key], ())):
                marker = f"assay-hide-{len(wanted)}-{token}"
                wanted.append((marker, item.as_string()))
                holder: Any = marked[location.servers_key][name]
                if not path:
                    holder[key] = marker
                    continue
                holder = holder[key]
                for part in path[:-1]:
                    holder = holder[int(part)] if isinstance(holder, list) else holder[part]
                last = path[-1]
                holder[int(last) if isinstance(holder, list) else last] = marker
    if not wanted:
        return []
    dumped = tomlkit.dumps(marked)
    found = []
    for marker, original in wanted:
        quotes = _quoted(dumped, marker)
        if quotes is None:
            raise ProtectError("cannot find a hidden value in the TOML text")
        found.append((quotes[0], len(marker) + 2 * quotes[1], original))
    spans, shift = [], 0
    for at, width, original in sorted(found):
        start = at - shift
        if text[start : start + len(original)] != original:
            raise ProtectError("cannot find a hidden value in the TOML text")
        spans.append((start, start + len(original)))
        shift += width - len(original)
    return spans


def masked(text: str, location: ConfigLocation) -> str:
    """``text`` with every value of :data:`HIDDEN_MEMBERS` replaced by :data:`HIDDEN`.
    ProtectError when the text cannot be read as the client reads it."""
    spans = _toml_spans(text, location) if location.toml else _json_spans(text, location)
    out = text
    for start, end in sorted(spans, reverse=True):
        out = out[:start] + HIDDEN + out[end:]
    return out


def shown_diff(old: str, new: str, location: ConfigLocation, path: str) -> str:
    """The unified diff of a dry run (``--- path`` / ``+++ path (protected)``), with the values
    protect never prints hidden on both sides; a line that ends without a line break gets one."""
    old_lines = masked(old, location).splitlines(keepends=True)
    new_lines = masked(new, location).splitlines(keepends=True)
    lines = difflib.unified_diff(old_lines, new_lines, fromfile=path, tofile=f"{path} (protected)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
