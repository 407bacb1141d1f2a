"""The undo of `assay mcp protect` (docs/protect.md, "Undo"): :func:`undo_text` takes a config's
text and protect's record of it and puts back the original text of every entry still exactly as
protect wrote it; an entry edited since is kept, with the command line it ran before protect, or
with ``force`` unwrapped as it is now (the wrapping comes off, the edits stay:
:mod:`assay.clients.protect.forced`). Without a record
(a config an older assay protected) only wrap lines exactly as protect writes them are
unwrapped. Sans-IO, over the helpers of :mod:`assay.clients.protect.edit`."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from assay.clients import ConfigLocation
from assay.clients.protect.arrays import render_array, render_string
from assay.clients.protect.check import ABSENT, Expect, check_edit, value_of
from assay.clients.protect.edit import (
    _Edit,
    _apply,
    _as_original,
    _as_written,
    _classify,
    _is_remote_record,
    _keys,
    _runs_wrap,
)
from assay.clients.protect.forced import forced_unwrap
from assay.clients.protect.model import Change, EntryRecord, Result
from assay.clients.protect.owned import own_wrap_line
from assay.clients.protect.model import HOLE
from assay.clients.protect.remote import entry_value, fill_holes
from assay.clients.protect.slots import find_slots
from assay.clients.wrapped import parse_wrapped

__all__ = ["undo_text", "original_line"]

_EDITED = "its command or args were changed after protect wrote them"


def original_line(record: EntryRecord, toml: bool) -> str:
    """The command line the entry ran before protect, shell-quoted (a remote entry: ``--url
    URL``); never a header value (docs/protect.md, "Remote servers")."""
    values: dict[tuple[str, ...], Any] = {}
    for m in record.edits:
        if m.key == () and m.original is not None:
            parts = m.original.split(HOLE)
            blank = {int(parts[i]): '""' for i in range(1, len(parts), 2)}
            try:
                raw = entry_value(fill_holes(m.original, blank), toml)
            except ValueError:
                return "--url (unreadable)"
            url = next((raw[k] for k in ("url", "serverUrl", "httpUrl") if isinstance(raw.get(k), str)), "")
            return shlex.join(["--url", url])
        values[m.key] = ABSENT if m.original is None else value_of(m.original, toml)
    cmd_key, args_key = _keys(record.edits[0].key[:-1])
    args = values.get(args_key, ABSENT)
    argv = [values.get(cmd_key, ""), *([] if args is ABSENT or not isinstance(args, list) else args)]
    return shlex.join(map(str, argv))


def undo_text(
    text: str, location: ConfigLocation, record: Sequence[EntryRecord] | None = None, *, force: bool = False
) -> Result:
    """Put back the original text of every entry of ``record`` that is still exactly as
    protect wrote it (docs/protect.md, "Undo"). An entry whose command or args were changed
    since is kept (its original command line is said), or with ``force`` unwrapped as it is now.
    Without a record (a config protected by an older assay), only entries whose wrap line is
    exactly one protect writes, or an earlier protect wrote, for them are unwrapped
    (:mod:`.owned`)."""
    if record is None:
        return _undo_without_record(text, location)
    scan, slots = find_slots(text, location)
    by_key = {r.key: r for r in record}
    edits: list[_Edit] = []
    changes: list[Change] = []
    expect: Expect = {}
    left: list[EntryRecord] = []
    seen = set()
    for slot in slots:
        key = (slot.map, slot.name)
        where = ".".join(slot.map)
        rec = by_key.get(key)
        if rec is None:
            got = _classify(slot.raw, location)
            if isinstance(got, str):
                changes.append(Change(slot.name, "skipped", got, where))
            elif parse_wrapped([got[1], *got[2]]) is not None:
                changes.append(Change(slot.name, "skipped", "not wrapped by assay mcp protect (left as it is)", where))
            else:
                changes.append(Change(slot.name, "skipped", "not protected", where))
            continue
        seen.add(key)
        got_edits = _as_written(text, slot, rec, location.toml)
        if got_edits is not None:
            edits += got_edits[0]
            expect[key] = values = got_edits[1]
            if () in values:
                url = next((values[()][k] for k in ("url", "serverUrl", "httpUrl") if k in values[()]), "")
                changes.append(Change(slot.name, "unwrapped", shlex.join(["--url", str(url)]), where))
                continue
            cmd_key, args_key = _keys(rec.edits[0].key[:-1])
            argv = [values[cmd_key], *([] if values.get(args_key, ABSENT) is ABSENT else values[args_key])]
            changes.append(Change(slot.name, "unwrapped", shlex.join(map(str, argv)), where))
        elif _as_original(slot, rec, location.toml):
            changes.append(Change(slot.name, "skipped", "already runs its original command", where))
        elif _is_remote_record(rec) and not _runs_wrap(slot.raw, location):
            changes.append(
                Change(
                    slot.name,
                    "skipped",
                    "no longer runs under assay mcp wrap (changed since protect wrote it); left as it is",
                    where,
                )
            )
        elif not isinstance(got := _classify(slot.raw, location), str) and parse_wrapped([got[1], *got[2]]) is None:
            changes.append(
                Change(
                    slot.name,
                    "skipped",
                    "no longer runs under assay mcp wrap (changed since protect wrote it); left as it is",
                    where,
                )
            )
        else:
            forced = forced_unwrap(text, scan, slot, rec, location) if force else None
            if forced is None or isinstance(forced, str):
                left.append(rec)
                why = "" if forced is None else f"; --force: {forced}"
                changes.append(
                    Change(
                        slot.name,
                        "kept",
                        f"could not be restored: {_EDITED} (left as it is){why}; "
                        f"before protect it ran: {original_line(rec, location.toml)}",
                        where,
                    )
                )
                continue
            edits += forced[0]
            expect[key] = forced[1]
            changes.append(
                Change(
                    slot.name,
                    "unwrapped",
                    f"{forced[2]} (edited since protect: the wrapping is taken off, your edits stay)",
                    where,
                    forced=True,
                )
            )
    for rec in record:
        if rec.key not in seen:
            changes.append(Change(rec.name, "skipped", "no longer in the file", ".".join(rec.map)))
    out = _apply(text, edits)
    if edits:
        check_edit(text, out, location, expect)
    return Result(out, changes, left)


def _undo_without_record(text: str, location: ConfigLocation) -> Result:
    scan, slots = find_slots(text, location)
    edits: list[_Edit] = []
    changes: list[Change] = []
    expect: Expect = {}
    for slot in slots:
        where = ".".join(slot.map)
        got = _classify(slot.raw, location)
        if isinstance(got, str):
            changes.append(Change(slot.name, "skipped", got, where))
            continue
        holder, command, args = got
        original = own_wrap_line(slot.name, command, args, location.client)
        if original is None:
            detail = (
                "runs assay mcp wrap in a form protect did not write; left as is"
                if parse_wrapped([command, *args], written_by_older=True) is not None
                else "not protected"
            )
            changes.append(Change(slot.name, "skipped", detail, where))
            continue
        cmd_key, args_key = _keys(holder)
        (cs, ce), (as_, ae) = slot.spans[cmd_key], slot.spans[args_key]
        edits.append(_Edit(cs, ce, render_string(original[0], location.toml)))
        edits.append(_Edit(as_, ae, render_array(original[1], location.toml, like=scan[as_:ae])))
        expect[(slot.map, slot.name)] = {cmd_key: original[0], args_key: original[1]}
        changes.append(
            Change(
                slot.name,
                "unwrapped",
                shlex.join([original[0], *original[1]])
                + " (no record of this file: its wrap line is exactly what protect writes)",
                where,
            )
        )
    out = _apply(text, edits)
    if edits:
        check_edit(text, out, location, expect)
    return Result(out, changes, None, fallback=True)
