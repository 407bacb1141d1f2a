"""The two edits of `assay mcp protect` (docs/protect.md): :func:`protect_text` and
:func:`undo_text` take a config file's text and return the new text plus one
:class:`~assay.protect.model.Change` per server. Sans-IO.

JSON and JSON with comments are edited in place: only the ``command`` and ``args`` values of the
servers that change are replaced, so comments, key order, indentation and every other member
stay byte for byte. TOML (Codex CLI) is edited with ``tomlkit``, which keeps comments and layout.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.clients import ConfigLocation
from assay.protect.jsonspans import _WS, _Node, _parse_json
from assay.protect.model import Change, ProtectError, Result, WrapOptions
from assay.protect.wrapline import wrapped_args
from assay.wrapped_entry import parse_wrapped

__all__ = ["protect_text", "undo_text", "unified_diff"]

_URL_KEYS = ("url", "serverUrl", "httpUrl")


def _json_maps(root: _Node, location: ConfigLocation) -> list[tuple[tuple[str, ...], _Node]]:
    """The server-map nodes, as :func:`assay.clients.server_maps` finds them."""
    out: list[tuple[tuple[str, ...], _Node]] = []
    assert root.members is not None
    if location.servers_key in root.members:
        out.append(((location.servers_key,), root.members[location.servers_key][1]))
    for pattern in location.nested:
        nodes: list[tuple[tuple[str, ...], _Node]] = [((), root)]
        for part in pattern:
            step: list[tuple[tuple[str, ...], _Node]] = []
            for path, node in nodes:
                if node.members is None:
                    continue
                keys = list(node.members) if part == "*" else [part] if part in node.members else []
                step.extend((path + (key,), node.members[key][1]) for key in keys)
            nodes = step
        out.extend(nodes)
    return out


def _dump(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _render_array(values: Sequence[str], scan: str, like: _Node | None, key_start: int) -> str:
    """``values`` as a JSON array laid out like the array it replaces (one line, or one item a
    line with the same indentation), or, with none, like the entry's members."""
    if not values:
        return "[]"
    if like is not None and "\n" not in scan[like.start : like.end]:
        inner = scan[like.start + 1 : like.end - 1]
        sep = ", "
        if like.items and len(like.items) > 1:
            between = scan[like.items[0].end : like.items[1].start]
            if between.strip() == ",":
                sep = between
        pad = " " if inner.startswith(" ") and inner.strip() else ""
        return "[" + pad + sep.join(_dump(v) for v in values) + pad + "]"
    if like is not None and like.items:
        first = like.items[0].start
        item_indent = scan[scan.rfind("\n", like.start, first) + 1 : first]
        close_line = scan.rfind("\n", like.start, like.end - 1)
        close_indent = scan[close_line + 1 : like.end - 1]
        if item_indent.strip() or close_indent.strip():
            return "[" + ", ".join(_dump(v) for v in values) + "]"
        return "[\n" + ",\n".join(item_indent + _dump(v) for v in values) + "\n" + close_indent + "]"
    line_start = scan.rfind("\n", 0, key_start) + 1
    indent = scan[line_start:key_start]
    if like is None and scan.rfind("\n", 0, key_start) >= 0 and not indent.strip():
        unit = "\t" if indent.startswith("\t") else "  "
        return "[\n" + ",\n".join(indent + unit + _dump(v) for v in values) + "\n" + indent + "]"
    return "[" + ", ".join(_dump(v) for v in values) + "]"


def _classify(name: str, raw: Any) -> tuple[str, list[str]] | str:
    """``(command, args)`` of a stdio entry, or the reason it is skipped."""
    if not isinstance(raw, dict):
        return "entry is not an object; left as is"
    command = raw.get("command")
    if command is None:
        if any(isinstance(raw.get(k), str) for k in _URL_KEYS):
            return "remote server (URL); wrap relays stdio servers only"
        return "no \"command\"; left as is"
    if not isinstance(command, str) or not command.strip():
        return "\"command\" is not a non-empty string; left as is"
    kind = raw.get("type")
    if kind is not None and kind != "stdio":
        return f"\"type\" is {_dump(str(kind))}, not stdio; left as is"
    args = raw.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return "\"args\" is not a list of strings; left as is"
    return command, list(args)


@dataclass
class _Edit:
    start: int
    end: int
    text: str


def _edit_entries(text: str, location: ConfigLocation, fn) -> Result:
    """Apply ``fn(name, raw) -> ((command, args) | None, Change)`` to every server of a JSON
    config, replacing only the spans of ``command`` and ``args``."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom) :]
    scan, root = _parse_json(body, location.jsonc)
    edits: list[_Edit] = []
    changes: list[Change] = []
    for path, table in _json_maps(root, location):
        where = ".".join(path)
        if table.value is None:
            continue
        if table.members is None:
            raise ProtectError(f"{_dump(where)} is not an object")
        for name, (_, node) in table.members.items():
            new, change = fn(name, node.value)
            detail = change.detail
            if new is not None and "args" in (node.members or {}):
                _, old_args = node.members["args"]  # type: ignore[index]
                if body[old_args.start : old_args.end] != scan[old_args.start : old_args.end]:
                    detail += " (the comments inside its \"args\" array are dropped)"
            changes.append(Change(change.name, change.action, detail, where))
            if new is None:
                continue
            command, args = new
            assert node.members is not None
            cmd_key_start, cmd_node = node.members["command"]
            edits.append(_Edit(cmd_node.start, cmd_node.end, _dump(command)))
            if "args" in node.members and node.members["args"][1].value is not None:
                _, args_node = node.members["args"]
                edits.append(_Edit(args_node.start, args_node.end, _render_array(args, scan, args_node, cmd_key_start)))
            elif "args" in node.members:
                _, args_node = node.members["args"]
                edits.append(_Edit(args_node.start, args_node.end, _render_array(args, scan, None, cmd_key_start)))
            else:
                before = scan[: cmd_key_start].rstrip(_WS)
                gap = scan[len(before) : cmd_key_start] if before.endswith((",", "{")) else " "
                member = f',{gap}"args": {_render_array(args, scan, None, cmd_key_start)}'
                edits.append(_Edit(cmd_node.end, cmd_node.end, member))
    out = body
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        out = out[: edit.start] + edit.text + out[edit.end :]
    return Result(bom + out, changes)


# --------------------------------------------------------------------------------------------
# TOML (Codex CLI)


def _edit_toml(text: str, location: ConfigLocation, fn) -> Result:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        doc = tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise ProtectError(f"invalid TOML: {exc}") from None
    changes: list[Change] = []
    table = doc.get(location.servers_key)
    if table is None:
        return Result(text, changes)
    if not isinstance(table, dict):
        raise ProtectError(f"{_dump(location.servers_key)} is not a table")
    for name in list(table.keys()):
        entry = table[name]
        new, change = fn(name, entry.unwrap() if hasattr(entry, "unwrap") else entry)
        changes.append(Change(change.name, change.action, change.detail, location.servers_key))
        if new is None:
            continue
        command, args = new
        entry["command"] = command
        array = tomlkit.array()
        array.extend(args)
        entry["args"] = array
    return Result(tomlkit.dumps(doc), changes)


def _edit(text: str, location: ConfigLocation, fn) -> Result:
    if location.toml:
        return _edit_toml(text, location, fn)
    return _edit_entries(text, location, fn)


# --------------------------------------------------------------------------------------------
# The two operations


def protect_text(text: str, location: ConfigLocation, options: WrapOptions) -> Result:
    """Wrap every stdio server that does not run under `assay mcp wrap` yet."""

    def fn(name: str, raw: Any):
        got = _classify(name, raw)
        if isinstance(got, str):
            return None, Change(name, "skipped", got)
        command, args = got
        if parse_wrapped([command, *args]) is not None:
            return None, Change(name, "skipped", "already runs under assay mcp wrap")
        return (options.assay, wrapped_args(name, command, args, options, client=location.client)), Change(
            name, "wrapped", shlex.join([command, *args])
        )

    return _edit(text, location, fn)


def undo_text(text: str, location: ConfigLocation) -> Result:
    """Restore the original command line of every entry protect wrapped."""

    def fn(name: str, raw: Any):
        got = _classify(name, raw)
        if isinstance(got, str):
            return None, Change(name, "skipped", got)
        command, args = got
        line = parse_wrapped([command, *args], written_by_older=True)
        original = None if line is None or line.interpreter is not None else (line.command, list(line.args))
        if original is None:
            detail = (
                "runs assay mcp wrap in a form protect did not write; left as is"
                if line is not None
                else "not protected"
            )
            return None, Change(name, "skipped", detail)
        return original, Change(name, "unwrapped", shlex.join([original[0], *original[1]]))

    return _edit(text, location, fn)


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=path, tofile=f"{path} (protected)"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
