"""The edit of `assay mcp protect` (docs/protect.md): :func:`protect_text` takes a config
file's text (and protect's record of the file, docs/protect.md, "The record") and returns the
new text, one :class:`~assay.clients.protect.model.Change` per server and the record to keep;
undo is :mod:`assay.clients.protect.undo`, over the helpers here. Sans-IO.

Every format (JSON, JSON with comments, TOML) is edited in place: only the text of the
``command`` and ``args`` values of the servers that change is replaced (:mod:`.slots` finds
where they sit), so comments, key order, quoting, indentation and every other member stay byte
for byte. Undo puts back the exact text the record holds, so protect then undo gives back the
original bytes. Every edit is checked by reading the new text as the client reads it: only the
values meant to change may have changed."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.protect.arrays import prepend_items, render_array, render_string
from assay.clients.protect.check import ABSENT, Expect, Members, check_edit, value_of
from assay.clients.protect.model import Change, EntryRecord, MemberEdit, ProtectError, Result, WrapOptions
from assay.clients.protect.remote import entry_value, fill_holes, is_remote, match_holes, wrap_remote
from assay.clients.protect.slots import Slot, find_slots
from assay.clients.protect.tomltext import line_anchor
from assay.clients.protect.wrapline import wrapped_args
from assay.clients.wrapped import parse_wrapped

__all__ = ["protect_text", "unified_diff"]

Path = tuple[str, ...]
_HAND_WRAPPED = "already runs under assay mcp wrap, not written by assay mcp protect (left as it is)"


def _quote(value: str) -> str:
    return render_string(value, False)


@dataclass
class _Edit:
    start: int
    end: int
    text: str


def _apply(text: str, edits: Sequence[_Edit]) -> str:
    out, last = text, len(text) + 1
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        if edit.end > last:
            raise ProtectError("two edits of one entry overlap; nothing was written")
        out = out[: edit.start] + edit.text + out[edit.end :]
        last = edit.start
    return out


def _classify(raw: Any, location: ConfigLocation) -> tuple[Path, str, list[str]] | str:
    """``(holder, command, args)`` of a stdio entry, or the reason it is skipped. ``holder`` is
    ``()``, or ``("command",)`` for Zed's older form ``"command": {"path", "args", "env"}``."""
    if not isinstance(raw, dict):
        return "entry is not an object; left as is"
    holder: Path = ()
    src = raw
    command = raw.get("command")
    if isinstance(command, dict) and location.client == "zed":
        holder, src, command = ("command",), command, command.get("path")
        if command is None:
            return 'no "command"."path"; left as is'
    if command is None:
        if is_remote(raw):
            return "remote server (URL), not protected"
        return 'no "command"; left as is'
    if not isinstance(command, str) or not command.strip():
        return '"command" is not a non-empty string; left as is'
    kind = raw.get("type")
    if kind is not None and kind != "stdio":
        return f'"type" is {_quote(str(kind))}, not stdio; left as is'
    args = src.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return '"args" is not a list of strings; left as is'
    return holder, command, list(args)


def _keys(holder: Path) -> tuple[Path, Path]:
    return (holder + ("path",) if holder else ("command",)), holder + ("args",)


def _wrap(
    text: str,
    scan: str,
    slot: Slot,
    holder: Path,
    command: str,
    args: list[str],
    options: WrapOptions,
    location: ConfigLocation,
) -> tuple[list[_Edit], EntryRecord, Members, str] | str:
    """The edits that wrap one entry, its record, the values expected after them, and a note
    (or the reason it cannot be wrapped in place)."""
    cmd_key, args_key = _keys(holder)
    toml = location.toml
    wrapped = wrapped_args(slot.name, command, args, options, client=location.client)
    s, e = slot.spans[cmd_key]
    new_cmd = render_string(options.assay, toml)
    edits = [_Edit(s, e, new_cmd)]
    members = [MemberEdit(cmd_key, text[s:e], new_cmd)]
    note = ""
    if args_key in slot.spans:
        s, e = slot.spans[args_key]
        head = [render_string(t, toml) for t in wrapped[: len(wrapped) - len(args)]]
        new = prepend_items(text[s:e], scan[s:e], head) if args else None
        if new is None:
            new = render_array(wrapped, toml, like=scan[s:e] if scan[s] == "[" else None)
            if scan[s:e] != text[s:e]:
                note = ' (the comments inside its "args" array are dropped; undo puts them back)'
        edits.append(_Edit(s, e, new))
        members.append(MemberEdit(args_key, text[s:e], new))
    else:
        adder = slot.adders.get(args_key)
        if adder is None:
            return 'no "args" member, and protect cannot add one here in place; left as is'
        array = render_array(wrapped, toml, indent=adder.indent, close=adder.close, eol=adder.eol)
        new = adder.prefix + array + adder.suffix
        edits.append(_Edit(adder.at, adder.at, new))
        members.append(MemberEdit(args_key, None, new, adder.after))
    expect = {cmd_key: options.assay, args_key: wrapped}
    return edits, EntryRecord(slot.map, slot.name, tuple(members)), expect, note


def _anchor(text: str, slot: Slot, edit: MemberEdit) -> int | None:
    """Where the member protect added starts in ``text`` (None: the command is gone)."""
    cmd_key = edit.key[:-1] + (("path",) if edit.key[:-1] else ("command",))
    span = slot.spans.get(cmd_key)
    if span is None:
        return None
    return span[1] if edit.after == "value" else line_anchor(text, span[1])[0]


def _as_written(text: str, slot: Slot, record: EntryRecord, toml: bool) -> tuple[list[_Edit], Members] | None:
    """The edits that put back the original text of a recorded entry and the values they put
    back, or None when its values are no longer exactly what protect wrote. A remote entry
    (``key`` ``()``, the whole entry) is matched with its header values cut out
    (docs/protect.md, "Remote servers")."""
    edits = []
    values: dict[Path, Any] = {}
    for m in record.edits:
        if m.key == () and m.original is not None:
            span = slot.spans.get(())
            holes = None if span is None else match_holes(text[span[0] : span[1]], m.written)
            if span is None or holes is None:
                return None
            original = fill_holes(m.original, holes)
            edits.append(_Edit(span[0], span[1], original))
            try:
                values[()] = entry_value(original, toml)
            except ValueError:
                return None
        elif m.original is not None:
            span = slot.spans.get(m.key)
            if span is None or text[span[0] : span[1]] != m.written:
                return None
            edits.append(_Edit(span[0], span[1], m.original))
            values[m.key] = value_of(m.original, toml)
        else:
            at = _anchor(text, slot, m)
            if at is None or text[at : at + len(m.written)] != m.written:
                return None
            edits.append(_Edit(at, at + len(m.written), ""))
            values[m.key] = ABSENT
    return edits, values


def _get(raw: Any, key: Path) -> Any:
    for part in key:
        if not isinstance(raw, dict) or part not in raw:
            return ABSENT
        raw = raw[part]
    return raw


def _as_original(slot: Slot, record: EntryRecord, toml: bool) -> bool:
    """Does the entry hold its original values again (put back by hand)? (A remote entry: it
    is a remote entry again.)"""
    if _is_remote_record(record):
        return is_remote(slot.raw)
    return all(_get(slot.raw, key) == value for key, value in _original_values(record, toml).items())


def _is_remote_record(record: EntryRecord) -> bool:
    return any(m.key == () for m in record.edits)


def _original_values(record: EntryRecord, toml: bool) -> dict[Path, Any]:
    return {m.key: ABSENT if m.original is None else value_of(m.original, toml) for m in record.edits}


def _restore(
    text: str, location: ConfigLocation, record: Sequence[EntryRecord]
) -> tuple[str, set[tuple[tuple[str, ...], str]]]:
    """``text`` with every recorded entry that is still exactly as protect wrote it put back;
    and the keys of those entries."""
    _, slots = find_slots(text, location)
    edits: list[_Edit] = []
    expect: Expect = {}
    done = set()
    by_key = {r.key: r for r in record}
    for slot in slots:
        rec = by_key.get((slot.map, slot.name))
        got = None if rec is None else _as_written(text, slot, rec, location.toml)
        if rec is not None and got is not None:
            edits += got[0]
            expect[rec.key] = got[1]
            done.add(rec.key)
    if not edits:
        return text, done
    out = _apply(text, edits)
    check_edit(text, out, location, expect)
    return out, done


def _runs_wrap(raw: Any, location: ConfigLocation) -> bool:
    got = _classify(raw, location)
    return not isinstance(got, str) and parse_wrapped([got[1], *got[2]]) is not None


def protect_text(
    text: str, location: ConfigLocation, options: WrapOptions, record: Sequence[EntryRecord] | None = None
) -> Result:
    """Wrap every server (stdio or remote) that does not run under `assay mcp wrap` yet, and give the
    entries of ``record`` still as protect wrote them the wrap options of ``options``
    (docs/protect.md, "Running protect again")."""
    record = list(record or [])
    old = {r.key: r for r in record}
    base, managed = _restore(text, location, record)
    scan, slots = find_slots(base, location)
    edits: list[_Edit] = []
    changes: list[Change] = []
    expect: Expect = {}
    kept: dict[tuple[tuple[str, ...], str], EntryRecord] = {}
    for slot in slots:
        key = (slot.map, slot.name)
        where = ".".join(slot.map)
        if is_remote(slot.raw):  # docs/protect.md, "Remote servers"
            remote = wrap_remote(base, scan, slot, options, location)
            if isinstance(remote, str):
                changes.append(Change(slot.name, "skipped", remote, where))
                continue
            start, end, new_text, rec, value, shown, opts = remote
            kept[key] = rec
            expect[key] = {(): value}
            edits.append(_Edit(start, end, new_text))
            if key in managed and old[key] == rec:
                changes.append(
                    Change(slot.name, "skipped", "already runs under assay mcp wrap (as protect wrote it)", where)
                )
            elif key in managed:
                changes.append(Change(slot.name, "updated", "wrap options now: " + opts, where, remote=True))
            else:
                changes.append(Change(slot.name, "wrapped", shown, where, remote=True))
            continue
        got = _classify(slot.raw, location)
        if isinstance(got, str):
            changes.append(Change(slot.name, "skipped", got, where))
            continue
        holder, command, args = got
        if parse_wrapped([command, *args]) is not None:  # docs/protect.md, "Which entries are wrapped"
            changed_since = key in old and key not in managed
            detail = (
                "already runs under assay mcp wrap, changed since protect wrote it (left as it is)"
                if changed_since
                else _HAND_WRAPPED
            )
            changes.append(Change(slot.name, "skipped", detail, where))
            if changed_since:
                kept[key] = old[key]
            continue
        done = _wrap(base, scan, slot, holder, command, args, options, location)
        if isinstance(done, str):
            changes.append(Change(slot.name, "skipped", done, where))
            continue
        entry_edits, rec, values, note = done
        kept[key] = rec
        expect[key] = values
        edits += entry_edits
        if key in managed and old[key] == rec:
            changes.append(
                Change(slot.name, "skipped", "already runs under assay mcp wrap (as protect wrote it)", where)
            )
        elif key in managed:
            wrapped = values[_keys(holder)[1]]
            detail = "wrap options now: " + shlex.join(wrapped[2 : len(wrapped) - len(args) - 2])
            changes.append(Change(slot.name, "updated", detail, where))
        else:
            changes.append(Change(slot.name, "wrapped", shlex.join([command, *args]) + note, where))
    out = _apply(base, edits)
    if edits:
        check_edit(base, out, location, expect)
    new_record = [kept[r.key] for r in record if r.key in kept]
    new_record += [r for k, r in kept.items() if k not in old]
    return Result(out, changes, new_record)


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=path, tofile=f"{path} (protected)"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
