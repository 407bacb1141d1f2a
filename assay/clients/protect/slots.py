"""Where the values protect edits sit in a config's text (docs/protect.md, "Formatting and
comments"): one :class:`Slot` per server entry, with the spans of its ``command`` and ``args``
values (``command.path`` and ``command.args`` in Zed's older form) and where an ``args`` member
would be added. Sans-IO; the JSON spans come from :mod:`assay.clients.protect.jsonspans`, the TOML ones
from :mod:`assay.clients.protect.tomlspans`."""

from __future__ import annotations

import json

from assay.clients import ConfigLocation
from assay.clients.protect.jsonspans import _WS, _Node, _parse_json
from assay.clients.protect.model import Adder, Member, Path, ProtectError, Slot
from assay.clients.protect.tomlspans import toml_slots

__all__ = ["Slot", "Adder", "Member", "find_slots"]  # the types are assay.clients.protect.model's


def _dump(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_maps(root: _Node, location: ConfigLocation) -> list[tuple[Path, _Node]]:
    """The server-map nodes, as :func:`assay.clients.server_maps` finds them."""
    out: list[tuple[Path, _Node]] = []
    assert root.members is not None
    if location.servers_key in root.members:
        out.append(((location.servers_key,), root.members[location.servers_key][1]))
    for pattern in location.nested:
        nodes: list[tuple[Path, _Node]] = [((), root)]
        for part in pattern:
            step: list[tuple[Path, _Node]] = []
            for path, node in nodes:
                if node.members is None:
                    continue
                keys = list(node.members) if part == "*" else [part] if part in node.members else []
                step.extend((path + (key,), node.members[key][1]) for key in keys)
            nodes = step
        out.extend(nodes)
    return out


def _member(key: str, at: int, node: _Node, off: int) -> Member:
    inner = None
    if node.members is not None:
        inner = tuple(_member(k, a, n, off) for k, (a, n) in node.members.items())
    return Member(key, at + off, (node.start + off, node.end + off), inner)


def _json_adder(scan: str, holder: _Node, cmd_key: str, offset: int) -> Adder | None:
    assert holder.members is not None
    if cmd_key not in holder.members:
        return None
    key_start, cmd = holder.members[cmd_key]
    before = scan[:key_start].rstrip(_WS)
    gap = scan[len(before) : key_start] if before.endswith((",", "{")) else " "
    line_start = scan.rfind("\n", 0, key_start) + 1
    indent = scan[line_start:key_start]
    item_indent = None
    if scan.rfind("\n", 0, key_start) >= 0 and not indent.strip():
        item_indent = indent + ("\t" if indent.startswith("\t") else "  ")
    eol = "\r\n" if scan[line_start - 2 : line_start] == "\r\n" else "\n"
    return Adder(cmd.end + offset, f',{gap}"args": ', "", "value", item_indent, indent, eol)


def _json_slots(text: str, location: ConfigLocation) -> tuple[str, list[Slot]]:
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom) :]
    scan, root = _parse_json(body, location.jsonc)
    off = len(bom)
    slots: list[Slot] = []
    for path, table in _json_maps(root, location):
        if table.value is None:
            continue
        if table.members is None:
            raise ProtectError(f"{_dump('.'.join(path))} is not an object")
        for name, (_, node) in table.members.items():
            slot = Slot(path, name, node.value)
            slots.append(slot)
            if node.members is None:
                continue
            slot.spans[()] = (node.start + off, node.end + off)
            slot.members = [_member(k, at, n, off) for k, (at, n) in node.members.items()]
            holders: list[tuple[Path, _Node, str]] = [((), node, "command")]
            inner = node.members.get("command")
            if inner is not None and inner[1].members is not None:
                holders.append((("command",), inner[1], "path"))  # Zed's older form
            for prefix, holder, cmd_key in holders:
                assert holder.members is not None
                for key in (cmd_key, "args"):
                    if key in holder.members:
                        value = holder.members[key][1]
                        slot.spans[prefix + (key,)] = (value.start + off, value.end + off)
                adder = _json_adder(scan, holder, cmd_key, off)
                if adder is not None and "args" not in holder.members:
                    slot.adders[prefix + ("args",)] = adder
    return bom + scan, slots


def find_slots(text: str, location: ConfigLocation) -> tuple[str, list[Slot]]:
    """``(scan, slots)``: ``scan`` is ``text`` with comments blanked (same length, so spans
    index both); ProtectError when the file cannot be read as the client reads it."""
    if location.toml:
        return toml_slots(text, location)
    return _json_slots(text, location)
