"""Undo's and protect's decisions once records, per-client log names and the one reader of wrap
lines meet (docs/protect.md, "Undo", "Running protect again", "Log files", "Which entries are
wrapped", "Output and exit codes")."""

from __future__ import annotations

import json
import shlex

from assay import clients
from assay.clients import protect as p

ASSAY = "/opt/venv/bin/assay"
SERVER = ["npx", "-y", "srv", "/ws/My Notes"]


def location(label: str) -> clients.ConfigLocation:
    return clients.client_locations(label, "linux", "/home/u", {}, "/w")[0]


def config(name: str, command: str, args: list[str]) -> str:
    return json.dumps({"mcpServers": {name: {"command": command, "args": args}}}, indent=2)


def test_without_a_record_undo_restores_the_line_this_version_writes_with_the_client_in_its_log_names():
    loc = location("cursor")
    options = p.WrapOptions(ASSAY, "/p.yaml", "/logs", observe=True)
    protected = p.protect_text(config("fs", SERVER[0], SERVER[1:]), loc, options).text
    args = json.loads(protected)["mcpServers"]["fs"]["args"]
    assert "/logs/cursor-fs.decisions.ndjson" in args and "assay://protect/cursor/fs" in args
    result = p.undo_text(protected, loc, None)
    assert result.fallback and [c.action for c in result.changes] == ["unwrapped"]
    assert json.loads(result.text) == json.loads(config("fs", SERVER[0], SERVER[1:]))
    # the same line with another client's log names is not the line protect writes into this file
    other = p.wrapped_args("fs", SERVER[0], SERVER[1:], options, client="claude_desktop")
    result = p.undo_text(config("fs", ASSAY, other), loc, None)
    assert [(c.action, c.detail) for c in result.changes] == [
        ("skipped", "runs assay mcp wrap in a form protect did not write; left as is")
    ]


def test_without_a_record_undo_restores_the_lines_an_earlier_protect_wrote():
    loc = location("cursor")
    # log names without the client
    earlier = p.wrapped_args("fs", SERVER[0], SERVER[1:], p.WrapOptions(ASSAY, "/p.yaml", "/logs"))
    assert "/logs/fs.decisions.ndjson" in earlier
    result = p.undo_text(config("fs", ASSAY, earlier), loc, None)
    assert [c.action for c in result.changes] == ["unwrapped"]
    assert json.loads(result.text)["mcpServers"]["fs"] == {"command": "npx", "args": SERVER[1:]}
    # a server named like the separator, its label a token of its own (wrap refuses this line)
    odd = ["mcp", "wrap", "--policy", "/p.yaml", "--label", "--", "--", "npx", "x"]
    result = p.undo_text(config("--", ASSAY, odd), loc, None)
    assert [c.action for c in result.changes] == ["unwrapped"]
    assert json.loads(result.text)["mcpServers"]["--"] == {"command": "npx", "args": ["x"]}


def test_protect_never_counts_a_shell_string_as_wrapped_and_undo_gives_it_back_by_the_record():
    loc = location("claude_desktop")
    shim = ["-c", "assay mcp wrap --policy p -- npx x"]
    text = config("shim", "sh", shim)
    first = p.protect_text(text, loc, p.WrapOptions(ASSAY, "/p.yaml"))
    assert [c.action for c in first.changes] == ["wrapped"] and first.record
    # running again with other options: the record says it is protect's, so it is updated
    second = p.protect_text(first.text, loc, p.WrapOptions(ASSAY, "/p2.yaml"), first.record)
    assert [c.action for c in second.changes] == ["updated"]
    assert p.undo_text(second.text, loc, second.record).text == text


def test_updated_and_unwrapped_lines_are_shell_quoted():
    loc = location("claude_desktop")
    text = config("fs", SERVER[0], SERVER[1:])
    first = p.protect_text(text, loc, p.WrapOptions(ASSAY, "/p.yaml"))
    assert first.changes[0].detail == shlex.join(SERVER)
    second = p.protect_text(first.text, loc, p.WrapOptions(ASSAY, "/my policies/p.yaml"), first.record)
    (change,) = second.changes
    assert change.action == "updated"
    assert change.detail == "wrap options now: --policy '/my policies/p.yaml' --label fs"
    (back,) = p.undo_text(second.text, loc, second.record).changes
    assert (back.action, back.detail) == ("unwrapped", "npx -y srv '/ws/My Notes'")
