"""`assay mcp protect --undo --force` (docs/protect.md, "Undo"): an entry whose wrap line was
changed after protect wrote it is kept by a plain undo, which says what it ran before protect;
``force`` takes the wrapping off as the entry is now: its command and args become the server
command line after ``--`` (edits to it kept), every other member stays as the user left it.
Every client's format: JSON, JSON with comments, TOML, Zed's older entry form."""

from __future__ import annotations

import pytest

from assay import clients
from assay.clients import protect as p
from assay.clients.protect.check import load
from tests.protect._configs import CASES

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/home/u/.config/assay/policy.yaml", "/home/u/logs")


def _map(doc, loc, name):
    for path, table in clients.server_maps(doc, loc):
        if isinstance(table, dict) and name in table:
            return table
    raise KeyError(name)


@pytest.mark.parametrize("label,scope,text,stdio,remote", CASES)
def test_force_unwraps_an_edited_entry_keeping_the_edit(label, scope, text, stdio, remote):
    loc = clients.client_locations(label, "linux", "/home/u", {}, "/w")[0 if scope == "user" else -1]
    if scope == "project":
        loc = clients.pick_location(label, "project", None, "linux", "/home/u", {}, "/w")
    protected = p.protect_text(text, loc, OPTS)
    name = stdio[0]
    # the user adds a wrap option to the line (a change protect did not write) and, in the server's
    # own arguments after `--`, a flag of the server's
    edited = protected.text.replace('"wrap",', '"wrap", "--verbose",', 1).replace("'wrap',", "'wrap', '--verbose',", 1)
    assert edited != protected.text
    before = _map(load(text, loc), loc, name)[name]
    plain = p.undo_text(edited, loc, protected.record)
    kept = {c.name: c for c in plain.changes}[name]
    assert kept.action == "kept" and "before protect it ran: " in kept.detail
    assert name in {r.name for r in plain.record}
    forced = p.undo_text(edited, loc, protected.record, force=True)
    change = {c.name: c for c in forced.changes}[name]
    assert change.action == "unwrapped" and change.detail.endswith("(edited since protect: the wrapping is taken off, your edits stay)")
    after = _map(load(forced.text, loc), loc, name)[name]
    # the server command line is back, the wrap option is gone with the wrapping, the rest stayed
    if isinstance(before.get("command"), dict):  # Zed's older form
        assert after["command"]["path"] == before["command"]["path"]
        assert after["command"]["args"] == before["command"].get("args", [])
    else:
        assert after["command"] == before["command"] and after.get("args", []) == before.get("args", [])
        assert {k: v for k, v in after.items() if k != "args"} == {k: v for k, v in before.items() if k != "args"}
    assert name not in {r.name for r in forced.record}
    # every other entry came back byte for byte, so the text only differs in this entry's values
    doc_after, doc_before = load(forced.text, loc), load(text, loc)
    _map(doc_after, loc, name)[name] = _map(doc_before, loc, name)[name]
    assert doc_after == doc_before
