"""Undo reverts only what protect did, by its own record of it (docs/protect.md, "Undo" and
"The record"), and protect then undo gives back the original bytes on real files of every
client's format (docs/protect.md, "Formatting and comments")."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from assay import clients
from assay.clients import protect as p
from assay.statedir import state_dir
from tests.discover._discover_helpers import make_env, run_assay
from tests.protect._configs import CASES, CLAUDE_DESKTOP, REMOTE_LEFT

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/home/u/.config/assay/policy.yaml")

HAND_WRAPPED = (
    '"git": {"command": "assay", "args": ["mcp", "wrap", "--policy", "/etc/assay/team.yaml", "--", "uvx", '
    '"mcp-server-git"]}'
)


def location(label: str, scope: str = "user", path: str | None = None) -> clients.ConfigLocation:
    rows = clients.client_locations(label, "linux", "/home/u", {}, "/home/u/dev/my-app")
    row = next(r for r in rows if r.scope == scope)
    if path is None:
        return row
    return clients.ConfigLocation(row.client, path, row.servers_key, row.scope, row.jsonc, row.toml, row.nested)


def protect(text, loc, record=None):
    return p.protect_text(text, loc, OPTS, record)


def undo(text, loc, record=None):
    return p.undo_text(text, loc, record)


def with_hand_wrapped(text: str) -> str:
    return text.replace('"mcpServers": {\n', '"mcpServers": {\n    ' + HAND_WRAPPED + ",\n", 1)


def round_trip(path: Path, loc: clients.ConfigLocation) -> tuple[p.FileOutcome, p.FileOutcome]:
    before = path.read_bytes()
    first = p.apply_to_file(str(path), loc, protect)
    assert first.written and path.read_bytes() != before
    second = p.apply_to_file(str(path), loc, undo)
    assert second.written
    return first, second


# ---------------------------------------------------------------------------------------------
# Every client's format, and the shapes people's files have


def _variants(text: str) -> dict[str, str]:
    return {
        "as-is": text,
        "crlf": text.replace("\n", "\r\n"),
        "bom": "\ufeff" + text,
        "tabs": text.replace("  ", "\t"),
        "no-final-newline": text.rstrip("\n"),
    }


@pytest.mark.parametrize("variant", ["as-is", "crlf", "bom", "tabs", "no-final-newline"])
@pytest.mark.parametrize("label,scope,text,stdio,remote", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_protect_then_undo_gives_back_the_original_bytes(tmp_path, label, scope, text, stdio, remote, variant):
    stdio = stdio + [n for n in remote if (label, n) not in REMOTE_LEFT]  # docs/protect.md, "Remote servers"
    text = _variants(text)[variant]
    if label == "codex" and variant == "bom":
        pytest.skip("TOML has no byte order mark")
    path = tmp_path / ("config.toml" if label == "codex" else "config.json")
    path.write_bytes(text.encode())
    os.chmod(path, 0o600)
    loc = location(label, scope, str(path))
    first, second = round_trip(path, loc)
    assert {c.name for c in first.result.changes if c.action == "wrapped"} == set(stdio)
    assert {c.name for c in second.result.changes if c.action == "unwrapped"} == set(stdio)
    assert path.read_bytes() == text.encode()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    if variant == "crlf":
        protected = first.result.text
        assert "\n" not in protected.replace("\r\n", "")  # no bare line feed was written


def test_a_symlinked_config_round_trips_through_the_link(tmp_path):
    real = tmp_path / "dotfiles" / "claude_desktop_config.json"
    real.parent.mkdir()
    real.write_text(CLAUDE_DESKTOP)
    link = tmp_path / "claude_desktop_config.json"
    link.symlink_to(real)
    first, _ = round_trip(link, location("claude_desktop", path=str(link)))
    assert link.is_symlink() and real.read_text() == CLAUDE_DESKTOP
    # one record for the file, whichever name it was reached by
    assert first.record_path == p.state.record_path(state_dir(None, os.environ), "claude_desktop", str(real))


# ---------------------------------------------------------------------------------------------
# Only what protect wrote is undone


def test_a_hand_wrapped_entry_survives_protect_and_undo(tmp_path):
    text = with_hand_wrapped(CLAUDE_DESKTOP)
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(text)
    first, second = round_trip(path, location("claude_desktop", path=str(path)))
    git = {c.name: c for c in first.result.changes}["git"]
    assert (git.action, git.detail) == (
        "skipped",
        "already runs under assay mcp wrap, not written by assay mcp protect (left as it is)",
    )
    git = {c.name: c for c in second.result.changes}["git"]
    assert (git.action, git.detail) == ("skipped", "not wrapped by assay mcp protect (left as it is)")
    assert path.read_text() == text


def test_an_entry_edited_between_protect_and_undo_is_kept_and_reported(tmp_path):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(CLAUDE_DESKTOP)
    loc = location("claude_desktop", path=str(path))
    first = p.apply_to_file(str(path), loc, protect)
    edited = first.result.text.replace(OPTS.policy, "/home/u/stricter.yaml", 1)  # the user's own change
    path.write_text(edited)
    second = p.apply_to_file(str(path), loc, undo)
    by_name = {c.name: c for c in second.result.changes}
    assert by_name["filesystem"].action == "kept"
    assert by_name["filesystem"].detail == (
        "could not be restored: its command or args were changed after protect wrote them (left as it is); "
        "before protect it ran: npx -y @modelcontextprotocol/server-filesystem /Users/username/Desktop "
        "/Users/username/Downloads"
    )
    assert by_name["github"].action == "unwrapped"
    doc = json.loads(path.read_text())
    assert doc["mcpServers"]["filesystem"]["args"][3] == "/home/u/stricter.yaml"
    assert doc["mcpServers"]["github"] == json.loads(CLAUDE_DESKTOP)["mcpServers"]["github"]
    # the record still holds the entry it could not restore, and says so again next time
    record = p.state.load_record(second.record_path)
    assert [r.name for r in record] == ["filesystem"]
    third = p.apply_to_file(str(path), loc, undo)
    assert not third.written and [c.action for c in third.result.changes if c.name == "filesystem"] == ["kept"]


def test_the_record_holds_the_exact_texts_and_is_private(tmp_path):
    path = tmp_path / "mcp.json"
    text = '{"mcpServers": {"a": {"command": "npx", "args": [\n  "-y",\n  "x"\n]}}}'
    path.write_text(text)
    out = p.apply_to_file(str(path), location("cursor", path=str(path)), protect)
    state = state_dir(None, os.environ)
    digest = p.state.config_digest(str(path))
    assert out.record_path == os.path.join(state, "protect", f"cursor-{digest}.json")
    assert stat.S_IMODE(os.stat(out.record_path).st_mode) == 0o600
    doc = json.loads(Path(out.record_path).read_text())
    assert doc["format"] == "assay-protect-record/1" and doc["client"] == "cursor" and doc["config"] == str(path)
    (entry,) = doc["entries"]
    assert entry["map"] == ["mcpServers"] and entry["name"] == "a"
    command, args = entry["edits"]
    assert command == {"key": ["command"], "original": '"npx"', "written": '"/opt/venv/bin/assay"'}
    assert args["key"] == ["args"] and args["original"] == '[\n  "-y",\n  "x"\n]'
    assert path.read_text().count(args["written"]) == 1
    p.apply_to_file(str(path), location("cursor", path=str(path)), undo)
    assert path.read_text() == text and not os.path.exists(out.record_path)


def test_a_damaged_record_is_refused_and_nothing_changes(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(CLAUDE_DESKTOP)
    loc = location("claude_desktop", path=str(path))
    out = p.apply_to_file(str(path), loc, protect)
    Path(out.record_path).write_text("{not json")
    protected = path.read_bytes()
    with pytest.raises(p.ProtectError, match="protect's record .* is damaged"):
        p.apply_to_file(str(path), loc, undo)
    assert path.read_bytes() == protected


def test_without_a_record_undo_restores_only_lines_exactly_as_protect_writes_them():
    # a config protected by an older assay: no record; an older line of another shape is left
    loc = location("claude_desktop")
    protected = protect(with_hand_wrapped(CLAUDE_DESKTOP), loc).text
    odd = protected.replace(
        '"--policy", "/home/u/.config/assay/policy.yaml", "--label", "github"',
        '"--label", "github", "--policy", "/home/u/.config/assay/policy.yaml"',
    )
    assert odd != protected
    result = undo(odd, loc, None)
    actions = {c.name: (c.action, c.detail) for c in result.changes}
    assert result.fallback and actions["filesystem"][0] == "unwrapped"
    assert actions["filesystem"][1].endswith("(no record of this file: its wrap line is exactly what protect writes)")
    assert actions["github"] == ("skipped", "runs assay mcp wrap in a form protect did not write; left as is")
    assert actions["git"][0] == "skipped"
    assert json.loads(result.text)["mcpServers"]["filesystem"] == json.loads(CLAUDE_DESKTOP)["mcpServers"]["filesystem"]


def test_an_entry_removed_or_restored_by_hand_is_said_and_dropped_from_the_record():
    loc = location("claude_desktop")
    first = protect(CLAUDE_DESKTOP, loc)
    by_hand = first.text
    doc = json.loads(by_hand)
    del doc["mcpServers"]["github"]
    doc["mcpServers"]["filesystem"] = json.loads(CLAUDE_DESKTOP)["mcpServers"]["filesystem"]
    result = undo(json.dumps(doc), loc, first.record)
    assert {c.name: (c.action, c.detail) for c in result.changes} == {
        "filesystem": ("skipped", "already runs its original command"),
        "github": ("skipped", "no longer in the file"),
    }
    assert result.record == [] and json.loads(result.text) == doc
    doc["mcpServers"]["filesystem"] = {"command": "other-server"}  # replaced by hand
    result = undo(json.dumps(doc), loc, first.record)
    assert {c.name: c.detail for c in result.changes}["filesystem"] == (
        "no longer runs under assay mcp wrap (changed since protect wrote it); left as it is"
    )
    assert result.record == []


# ---------------------------------------------------------------------------------------------
# The command line


def test_cli_undo_leaves_a_hand_wrapped_entry_and_says_so(tmp_path):
    home = tmp_path / "home"
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    text = with_hand_wrapped(CLAUDE_DESKTOP)
    config.write_text(text)
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    env = make_env(home)
    res = run_assay("mcp", "protect", "claude", "--policy", str(policy), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert f"record: {home}/.local/state/assay/protect/claude_desktop-" in out
    config.write_text(config.read_text().replace('"@modelcontextprotocol/server-github"', '"@mcp/server-github"'))
    res = run_assay("mcp", "protect", "claude", "--undo", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode()
    assert '  skipped   "git": not wrapped by assay mcp protect (left as it is)\n' in out
    assert (
        '  kept      "github": could not be restored: its command or args were changed after protect wrote '
        "them (left as it is); before protect it ran: npx -y @modelcontextprotocol/server-github\n"
    ) in out
    assert (
        "--force unwraps the kept entries as they are now (the wrapping comes off, your edits stay): "
        "assay mcp protect claude --undo --force\n"
    ) in out
    assert '  unwrapped "filesystem": npx -y @modelcontextprotocol/server-filesystem' in out
    doc = json.loads(config.read_text())
    assert doc["mcpServers"]["git"]["args"][3] == "/etc/assay/team.yaml"
    assert doc["mcpServers"]["github"]["command"] != "npx"
    # docs/protect.md, "Undo": --force takes the wrapping off as the entry is now, the edit kept
    res = run_assay("mcp", "protect", "claude", "--undo", "--force", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        '  unwrapped "github": npx -y @mcp/server-github (edited since protect: the wrapping is taken off, '
        "your edits stay)\n"
    ) in res.stdout.decode()
    doc = json.loads(config.read_text())
    assert doc["mcpServers"]["github"] == {
        "command": "npx",
        "args": ["-y", "@mcp/server-github"],
        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "<token>"},
    }
    assert config.read_text() == text.replace('"@modelcontextprotocol/server-github"', '"@mcp/server-github"')
    assert "(removed: nothing left to undo)" in res.stdout.decode()
    res = run_assay("mcp", "protect", "claude", "--policy", str(policy), "--force", env=env, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.decode().startswith("assay: error: --force goes with --undo")


def test_undo_of_entries_put_back_by_hand_forgets_them_without_touching_the_file(tmp_path):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(CLAUDE_DESKTOP)
    loc = location("claude_desktop", path=str(path))
    out = p.apply_to_file(str(path), loc, protect)
    path.write_text(CLAUDE_DESKTOP)  # the user put the original back by hand
    again = p.apply_to_file(str(path), loc, undo)
    assert not again.written and path.read_text() == CLAUDE_DESKTOP
    assert {c.detail for c in again.result.changes} == {"already runs its original command"}
    assert not os.path.exists(out.record_path)
