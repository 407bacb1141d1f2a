"""Running protect again updates the wrap options of the entries it manages, and only those
(docs/protect.md, "Running protect again"); the wrap options --observe, --hide-denied-tools and
--declared-manifest (docs/protect.md, "What changes")."""

from __future__ import annotations

import json

import pytest

from assay import clients
from assay.clients import protect as p
from tests.discover._discover_helpers import make_env, run_assay
from tests.protect._configs import CLAUDE_DESKTOP, CODEX

ASSAY = "/opt/venv/bin/assay"
HAND = '"git": {"command": "assay", "args": ["mcp", "wrap", "--policy", "/etc/assay/team.yaml", "--", "uvx", "g"]}'


def location(label: str) -> clients.ConfigLocation:
    return clients.client_locations(label, "linux", "/home/u", {}, "/w")[0]


@pytest.mark.parametrize("label,text", [("claude_desktop", CLAUDE_DESKTOP), ("codex", CODEX)])
def test_protect_again_with_other_options_updates_its_entries_and_undo_still_restores(label, text):
    loc = location(label)
    first = p.protect_text(text, loc, p.WrapOptions(ASSAY, "/p1.yaml"))
    second = p.protect_text(first.text, loc, p.WrapOptions(ASSAY, "/p2.yaml", "/logs", observe=True), first.record)
    actions = {c.name: (c.action, c.detail) for c in second.changes if c.action != "skipped"}
    name = next(iter(actions))
    assert actions[name][0] == "updated"
    assert actions[name][1].startswith("wrap options now: --policy /p2.yaml --label " + name)
    assert "--dry-run" in actions[name][1]
    assert "/p1.yaml" not in second.text and second.text.count("/p2.yaml") == len(actions)
    # the record keeps the original text, so undo gives back the original bytes
    assert [m.original for r in second.record for m in r.edits] == [m.original for r in first.record for m in r.edits]
    assert p.undo_text(second.text, loc, second.record).text == text
    # the same options again: nothing to change
    third = p.protect_text(second.text, loc, p.WrapOptions(ASSAY, "/p2.yaml", "/logs", observe=True), second.record)
    assert third.text == second.text and not third.changed
    assert all(
        c.detail == "already runs under assay mcp wrap (as protect wrote it)" for c in third.changes if c.name == name
    )


def test_a_hand_wrapped_or_edited_entry_is_not_updated():
    loc = location("claude_desktop")
    text = CLAUDE_DESKTOP.replace('"mcpServers": {\n', '"mcpServers": {\n    ' + HAND + ",\n", 1)
    first = p.protect_text(text, loc, p.WrapOptions(ASSAY, "/p1.yaml"))
    edited = first.text.replace('"/p1.yaml", "--label", "github"', '"/mine.yaml", "--label", "github"')
    second = p.protect_text(edited, loc, p.WrapOptions(ASSAY, "/p2.yaml"), first.record)
    changes = {c.name: (c.action, c.detail) for c in second.changes}
    assert changes["git"] == (
        "skipped",
        "already runs under assay mcp wrap, not written by assay mcp protect (left as it is)",
    )
    assert changes["github"] == (
        "skipped",
        "already runs under assay mcp wrap, changed since protect wrote it (left as it is)",
    )
    assert changes["filesystem"][0] == "updated"
    doc = json.loads(second.text)["mcpServers"]
    assert doc["git"]["args"][3] == "/etc/assay/team.yaml" and doc["github"]["args"][3] == "/mine.yaml"
    assert doc["filesystem"]["args"][3] == "/p2.yaml"


@pytest.mark.parametrize("name", ["srv", "--", "-x"])
def test_the_new_wrap_options_are_read_back_by_wrap(monkeypatch, name):
    from tests.test_wrap_args import outcome

    opts = p.WrapOptions(
        "/bin/assay", "/p.yaml", None, observe=True, hide_denied_tools=True, declared_manifest="-m.json"
    )
    args = p.wrapped_args(name, "npx", ["-y", "x"], opts)
    assert args[-7:] == ["--dry-run", "--hide-denied-tools", "--declared-manifest=-m.json", "--", "npx", "-y", "x"]
    for fast in (True, False):
        code, _, err, runs = outcome(monkeypatch, args[2:], fast)
        assert (code, err) == (0, "")
        (config,) = runs
        assert config.dry_run and config.hide_denied_tools and config.declared_manifest == "-m.json"
        assert config.argv == ["npx", "-y", "x"] and config.label == name


def test_cli_protect_again_updates_and_dry_run_shows_the_diff(tmp_path):
    home = tmp_path / "home"
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(CLAUDE_DESKTOP)
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    env = make_env(home)
    assert run_assay("mcp", "protect", "claude", "--policy", str(policy), env=env, cwd=tmp_path).returncode == 0
    protected = config.read_bytes()
    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--policy",
        str(policy),
        "--observe",
        "--hide-denied-tools",
        "--declared-manifest",
        str(manifest),
        "--dry-run",
        env=env,
        cwd=tmp_path,
    )
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr
    assert '  updated   "github": wrap options now: --policy ' in out and "+" in out and "--declared-manifest" in out
    assert out.endswith("dry run: nothing was written\n") and config.read_bytes() == protected
    res = run_assay("mcp", "protect", "claude", "--policy", str(policy), "--observe", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(config.read_text())["mcpServers"]["github"]["args"][6] == "--dry-run"
    res = run_assay("mcp", "protect", "claude", "--undo", env=env, cwd=tmp_path)
    assert res.returncode == 0 and config.read_text() == CLAUDE_DESKTOP


def test_cli_a_declared_manifest_that_is_not_a_file_is_a_usage_error(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text("{}")
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    res = run_assay(
        "mcp",
        "protect",
        "cursor",
        "--policy",
        str(policy),
        "--declared-manifest",
        "nope.json",
        env=make_env(home),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert res.stderr.decode() == f"assay: error: --declared-manifest {tmp_path / 'nope.json'} is not a file\n"


def test_log_arguments_is_written_read_back_and_kept_by_updates(monkeypatch):
    """protect --log-arguments (docs/protect.md, "Logging arguments"): the flag comes last before
    `--`; wrap and the one reader of wrap lines read it; protect again without it takes it off,
    with it puts it back; an older protect's line with it is still protect's own."""
    from assay.clients.protect.owned import own_wrap_line
    from assay.clients.wrapped import parse_wrapped
    from tests.test_wrap_args import outcome

    opts = p.WrapOptions("/bin/assay", "/p.yaml", "/logs", observe=True, log_arguments=True)
    args = p.wrapped_args("srv", "npx", ["-y", "x"], opts, client="claude_desktop")
    assert args[args.index("--") - 1] == "--log-arguments"
    line = parse_wrapped(["/bin/assay", *args])
    assert line is not None and line.options["log_arguments"] is True
    assert own_wrap_line("srv", "/bin/assay", args, client="claude_desktop") == ("npx", ["-y", "x"])
    for fast in (True, False):
        code, _, err, runs = outcome(monkeypatch, args[2:], fast)
        assert (code, err) == (0, "")
        (config,) = runs
        assert config.log_arguments is True and config.log_arguments_max == 4096

    loc = location("claude_desktop")
    first = p.protect_text(CLAUDE_DESKTOP, loc, p.WrapOptions(ASSAY, "/p.yaml", "/logs"))
    assert "--log-arguments" not in first.text
    on = p.protect_text(first.text, loc, p.WrapOptions(ASSAY, "/p.yaml", "/logs", log_arguments=True), first.record)
    updated = [c for c in on.changes if c.action == "updated"]
    assert updated and all("--log-arguments" in c.detail for c in updated)
    assert on.text.count('"--log-arguments"') == len(updated)
    again = p.protect_text(on.text, loc, p.WrapOptions(ASSAY, "/p.yaml", "/logs", log_arguments=True), on.record)
    assert again.text == on.text and not again.changed
    off = p.protect_text(on.text, loc, p.WrapOptions(ASSAY, "/p.yaml", "/logs"), on.record)
    assert off.text == first.text
    assert p.undo_text(on.text, loc, on.record).text == CLAUDE_DESKTOP
