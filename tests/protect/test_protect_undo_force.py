"""`assay mcp protect --undo --force` (docs/protect.md, "Undo"): an entry whose wrap line was
changed after protect wrote it is kept by a plain undo, which says what it ran before protect;
``force`` takes the wrapping off as the entry is now: its command and args become the server
command line after ``--`` (edits to it kept), every other member stays as the user left it.
Every client's format: JSON, JSON with comments, TOML, Zed's older entry form."""

from __future__ import annotations

import json

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
    assert change.action == "unwrapped" and change.detail.endswith(
        "(edited since protect: the wrapping is taken off, your edits stay)"
    )
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


REMOTE = [
    (
        "claude_code",
        '{"mcpServers": {"r": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer a", "X-B": "b"}}}}',
    ),
    (
        "cursor",
        '{\n  "mcpServers": {\n    "r": {\n      "url": "https://h/mcp",\n      "headers": {\n        "A": "${env:A}"\n      }\n    }\n  }\n}\n',
    ),
    (
        "vscode",
        '{\n  "servers": {\n    // c\n    "r": {"type": "http", "url": "https://h/mcp", "headers": {"A": "${input:k}"}, "gallery": true},\n  },\n}\n',
    ),
    ("windsurf", '{"mcpServers": {"r": {"serverUrl": "https://h/mcp", "headers": {"A": "a"}}}}'),
    ("gemini_cli", '{"mcpServers": {"r": {"httpUrl": "https://h/mcp", "headers": {"A": "$A"}, "timeout": 5000}}}'),
    ("gemini_cli", '{"mcpServers": {"r": {"url": "https://h/sse"}}}'),
    ("zed", '{"context_servers": {"r": {"url": "https://h/mcp", "headers": { "Authorization": "Bearer t" },},},}'),
]


def _with_value(text: str, name: str, old: str, new: str) -> str:
    """``text`` with the first value ``old`` after the member ``name`` replaced by ``new``."""
    at = text.index(old, text.index(f'"{name}":') + len(name) + 3)
    return text[:at] + new + text[at + len(old) :]


@pytest.mark.parametrize("label,text", REMOTE)
def test_force_gives_back_a_remote_entry_as_it_is_now(label, text):
    # docs/protect.md, "Undo": the user added a member and changed a header's value (in env)
    loc = clients.pick_location(label, "user", "/tmp/config", "linux", "/home/u", {}, "/w")
    protected = p.protect_text(text, loc, OPTS)
    before = load(text, loc)[loc.servers_key]["r"]
    entry = load(protected.text, loc)[loc.servers_key]["r"]
    edited = protected.text.replace('"command":', '"disabled": false, "command":', 1)
    want = {"disabled": False, **before}
    if "env" in entry:
        var = next(iter(entry["env"]))
        edited = _with_value(edited, var, json.dumps(entry["env"][var]), '"changed"')
        want["headers"] = {**before["headers"], next(iter(before["headers"])): "changed"}
    assert {c.name: c.action for c in p.undo_text(edited, loc, protected.record).changes} == {"r": "kept"}
    forced = p.undo_text(edited, loc, protected.record, force=True)
    assert [(c.action, c.forced, c.detail.startswith("--url ")) for c in forced.changes] == [("unwrapped", True, True)]
    assert load(forced.text, loc)[loc.servers_key]["r"] == want
    assert forced.record == []
    if "env" in entry:  # a variable in env that no header names has nowhere to go: kept, and said
        extra = _with_value(edited, var, '"changed"', '"changed", "X_OTHER": "x"')
        kept = p.undo_text(extra, loc, protected.record, force=True).changes[0]
        assert kept.action == "kept" and "variables that no header of its wrap line names" in kept.detail


def test_force_keeps_a_codex_remote_entry_and_says_why():
    loc = clients.pick_location("codex", "user", "/tmp/config.toml", "linux", "/home/u", {}, "/w")
    text = '[mcp_servers.r]\nurl = "https://h/mcp"\nbearer_token_env_var = "T"\n'
    protected = p.protect_text(text, loc, OPTS)
    edited = protected.text.replace("[mcp_servers.r]\n", "[mcp_servers.r]\nenabled = false\n")
    kept = p.undo_text(edited, loc, protected.record, force=True).changes[0]
    assert kept.action == "kept" and "not rebuilt from its parts" in kept.detail
    assert "before protect it ran: --url https://h/mcp" in kept.detail
