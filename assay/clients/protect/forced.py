"""``assay mcp protect --undo --force`` (docs/protect.md, "Undo"): an entry changed since protect
wrote it is unwrapped as it is now. The wrapping comes off, the user's edits stay.

- A stdio entry: ``command`` and ``args`` become the server command line after its wrap line's
  ``--``, with the edits made to it; every other member stays.
- A remote entry (JSON clients): the stdio entry protect wrote becomes a remote entry again,
  member by member in its current order: ``command`` becomes the URL member of the original
  entry with the line's ``--url``, ``args`` the original entry's ``type``/``transport`` members,
  ``env`` its ``headers`` (each ``--header-env Name=VAR`` with the text ``VAR`` holds now),
  protect's stdio ``type`` goes; every other member, the user's own included, stays as it is.
  What cannot be carried back that way (a header option protect never writes, a variable in
  ``env`` that no header names, Codex's TOML) is said, and the entry is kept.

Sans-IO: the text, the entry's slot and protect's record in; the edits and the values they
leave out."""

from __future__ import annotations

import shlex
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.protect.arrays import render_array, render_string
from assay.clients.protect.edit import _Edit, _classify, _keys
from assay.clients.protect.jsonspans import _parse_json
from assay.clients.protect.model import EntryRecord
from assay.clients.protect.model import HOLE
from assay.clients.protect.remote import URL_KEYS, _colon, _joined, entry_value, fill_holes, read_remote
from assay.clients.protect.slots import Member, Slot
from assay.clients.wrapped import WrappedLine, parse_wrapped

__all__ = ["forced_unwrap"]

_TYPE_KEYS = ("type", "transport")


def forced_unwrap(
    text: str, scan: str, slot: Slot, record: EntryRecord, location: ConfigLocation
) -> tuple[list[_Edit], dict[tuple[str, ...], Any], str] | str:
    """``(edits, values expected after them, what it runs now)`` that take the wrapping off the
    entry of ``slot`` as it is now, or why that cannot be done."""
    got = _classify(slot.raw, location)
    if isinstance(got, str):
        return got
    holder, command, args = got
    line = parse_wrapped([command, *args])
    if line is None:
        return "it no longer runs under assay mcp wrap"
    if line.url is not None:
        return _remote(text, scan, slot, record, line, location)
    cmd_key, args_key = _keys(holder)
    if args_key not in slot.spans:
        return "its args cannot be found in place"
    (cs, ce), (as_, ae) = slot.spans[cmd_key], slot.spans[args_key]
    edits = [
        _Edit(cs, ce, render_string(line.command, location.toml)),
        _Edit(as_, ae, render_array(list(line.args), location.toml, like=scan[as_:ae] if scan[as_] == "[" else None)),
    ]
    return edits, {cmd_key: line.command, args_key: list(line.args)}, shlex.join(line.server)


def _original_members(record: EntryRecord) -> tuple[str, list[str]] | str:
    """The URL key of the entry before protect and the text of its ``type``/``transport``
    members, from the record's original text (its header values cut out)."""
    original = next((m.original for m in record.edits if m.key == () and m.original is not None), None)
    if original is None:
        return "protect's record holds no remote entry for it"
    parts = original.split(HOLE)
    filled = fill_holes(original, {int(parts[i]): '""' for i in range(1, len(parts), 2)})
    try:
        _, node = _parse_json(filled, True)
    except Exception:  # noqa: BLE001  (a record is read, never trusted: any failure is a reason)
        return "protect's record of it cannot be read"
    members = node.members or {}
    url_key = next((k for k in URL_KEYS if k in members), None)
    if url_key is None:
        return "protect's record of it has no URL member"
    kinds = [filled[at : members[k][1].end] for k in _TYPE_KEYS if k in members for at in (members[k][0],)]
    return url_key, kinds


def _remote(
    text: str, scan: str, slot: Slot, record: EntryRecord, line: WrappedLine, location: ConfigLocation
) -> tuple[list[_Edit], dict[tuple[str, ...], Any], str] | str:
    if location.toml:
        return "a Codex remote entry changed since protect wrote it is not rebuilt from its parts"
    if slot.members is None or () not in slot.spans:
        return "the entry is not an object"
    if any(line.options.get(k) for k in ("header", "header_env_if_set", "bearer_env")):
        return "its wrap line has header options protect never writes"
    assert line.url is not None
    got = _original_members(record)
    if isinstance(got, str):
        return got
    url_key, kinds = got
    pairs = [str(t).partition("=") for t in _tuple(line.options.get("header_env"))]
    env = next((m for m in slot.members if m.key == "env"), None)
    values: dict[str, Member] = {} if env is None or env.inner is None else {m.key: m for m in env.inner}
    if pairs and env is None:
        return "its env, which held its header values, is gone"
    if set(values) - {var for _, _, var in pairs}:
        return "its env has variables that no header of its wrap line names"
    if any(var not in values for _, _, var in pairs):
        return "a header's variable is no longer in its env"
    items: list[str] = []
    stdio_type = isinstance(slot.raw.get("type"), str) and slot.raw["type"] == "stdio"  # protect's (VS Code)
    for m in slot.members:
        if m.key == "command":
            items.append(render_string(url_key, False) + _colon(text, scan, m) + render_string(line.url, False))
        elif m.key == "args":
            items += [] if stdio_type else kinds
        elif m.key == "env" and env is not None and env.inner is not None:
            heads = [
                render_string(name, False)
                + _colon(text, scan, values[var])
                + text[values[var].value[0] : values[var].value[1]]
                for name, _, var in pairs
            ]
            items.append(
                render_string("headers", False) + _colon(text, scan, m) + _joined(text, scan, m.value, env.inner, heads)
            )
        elif m.key == "type" and stdio_type:
            items += kinds  # the original type where protect's stdio type stands
        else:
            items.append(text[m.start : m.value[1]])
    span = slot.spans[()]
    new = _joined(text, scan, span, slot.members, items)
    try:
        value = entry_value(new, False)
    except ValueError:
        return "the entry cannot be rebuilt as a remote one"
    remote = read_remote(value, location)
    if isinstance(remote, str) or remote.url != line.url or [h for h, _ in remote.headers] != [n for n, _, _ in pairs]:
        return "the entry cannot be rebuilt as a remote one"
    return [_Edit(span[0], span[1], new)], {(): value}, shlex.join(["--url", line.url])


def _tuple(value: object) -> tuple[object, ...]:
    return value if isinstance(value, tuple) else ()
