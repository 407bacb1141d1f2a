"""`assay mcp protect` on real files: backups, atomic replacement, refusals, the command line."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from assay import clients
from assay.clients import protect as p
from assay.statedir import state_dir
from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay
from tests.protect._configs import CLAUDE_DESKTOP, CODEX, CURSOR, VSCODE

OPTS = p.WrapOptions("/opt/venv/bin/assay", "/p.yaml")


def loc(label: str) -> clients.ConfigLocation:
    return clients.client_locations(label, "linux", "/h", {}, "/w")[0]


def protect(text, location, record=None):
    return p.protect_text(text, location, OPTS, record)


def undo(text, location, record=None):
    return p.undo_text(text, location, record)


def test_apply_writes_a_backup_into_the_state_dir_and_keeps_the_mode(tmp_path):
    # docs/protect.md, "Backups": 0600, in <state>/backups, named by client, config digest and time
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(CLAUDE_DESKTOP)
    os.chmod(path, 0o600)
    state = tmp_path / "state"
    out = p.apply_to_file(str(path), loc("claude_desktop"), protect, now=0, state=str(state))
    digest = p.state.config_digest(str(path))
    assert out.written and out.backup == str(
        state / "backups" / f"claude_desktop-{digest}-19700101T000000.000000Z-000-claude_desktop_config.json"
    )
    assert Path(out.backup).read_text() == CLAUDE_DESKTOP
    assert stat.S_IMODE(os.stat(out.backup).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_text() == out.result.text != CLAUDE_DESKTOP
    # a second run never overwrites the first backup
    out2 = p.apply_to_file(str(path), loc("claude_desktop"), undo, now=0, state=str(state))
    assert out2.backup == out.backup.replace("-000-", "-001-")
    assert path.read_text() == CLAUDE_DESKTOP
    assert sorted(x.name for x in tmp_path.iterdir()) == [path.name, "state"]


def test_a_symlinked_config_is_edited_where_it_points(tmp_path):
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text(CURSOR)
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    out = p.apply_to_file(str(link), loc("cursor"), protect)
    assert link.is_symlink() and real.read_text() == out.result.text
    assert out.backup.endswith("-000-mcp.json") and p.state.config_digest(str(real)) in out.backup
    p.apply_to_file(str(link), loc("cursor"), undo)
    assert link.is_symlink() and real.read_text() == CURSOR


def test_dry_run_and_nothing_to_change_write_nothing(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(CURSOR)
    out = p.apply_to_file(str(path), loc("cursor"), protect, dry_run=True)
    assert out.result.changed and not out.written and out.backup is None
    assert path.read_text() == CURSOR and os.listdir(tmp_path) == ["mcp.json"]
    path.write_text(out.result.text)
    again = p.apply_to_file(str(path), loc("cursor"), protect)
    assert not again.written and os.listdir(tmp_path) == ["mcp.json"]


def test_a_config_changed_while_protect_works_is_refused(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(CURSOR)
    concurrent = CURSOR.replace("mcp-server", "other-server")

    def edit(text, location, record):
        result = protect(text, location, record)
        path.write_text(concurrent)  # the client (or the user) saves the file meanwhile
        return result

    with pytest.raises(p.ProtectError, match="changed while assay worked on it; nothing was written"):
        p.apply_to_file(str(path), loc("cursor"), edit)
    assert path.read_text() == concurrent
    assert not [x for x in os.listdir(tmp_path) if x.startswith(".assay-protect-")]
    # the record is not changed either: nothing of the file is protect's
    assert not os.path.exists(p.state.record_path(state_dir(None, os.environ), "cursor", str(path)))


def test_unreadable_inputs_are_refused(tmp_path):
    with pytest.raises(p.ProtectError, match="does not exist"):
        p.apply_to_file(str(tmp_path / "none.json"), loc("cursor"), protect)
    with pytest.raises(p.ProtectError, match="not a regular file"):
        p.apply_to_file(str(tmp_path), loc("cursor"), protect)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"mcpServers": {"\xff": {}}}')
    with pytest.raises(p.ProtectError, match="not valid UTF-8"):
        p.apply_to_file(str(bad), loc("cursor"), protect)


def test_starter_policy_is_never_overwritten(tmp_path):
    target = tmp_path / "a" / "b" / "policy.yaml"
    p.write_starter_policy(str(target))
    assert target.read_text() == p.STARTER_POLICY
    target.write_text("mine")
    with pytest.raises(p.ProtectError, match="already exists"):
        p.write_starter_policy(str(target))
    assert target.read_text() == "mine"


# ---------------------------------------------------------------------------------------------
# The command line


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def claude_config(home: Path) -> Path:
    path = home / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(CLAUDE_DESKTOP)
    return path


def test_cli_protect_with_init_policy_then_undo(home, tmp_path):
    config = claude_config(home)
    env = make_env(home)
    policy = home / ".config" / "assay" / "policy.yaml"
    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--policy",
        str(policy),
        "--init-policy",
        "--log-dir",
        str(tmp_path / "logs"),
        env=env,
        cwd=tmp_path,
    )
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr
    assert res.stderr == b""
    assert policy.read_text() == p.STARTER_POLICY
    assert f"wrote a starter policy to {policy}" in out
    assert (
        '  wrapped   "filesystem": npx -y @modelcontextprotocol/server-filesystem /Users/username/Desktop /Users/username/Downloads'
        in out
    )
    assert "Restart Claude Desktop so it starts these servers through assay mcp wrap." in out
    assert "Undo with: assay mcp protect claude --undo" in out
    assert (tmp_path / "logs").is_dir()
    assert f"Decision logs: {tmp_path / 'logs'}/claude_desktop-<server>.decisions.ndjson" in out
    doc = json.loads(config.read_text())
    entry = doc["mcpServers"]["github"]
    assert entry["command"] == str(ASSAY)
    assert entry["args"][:6] == ["mcp", "wrap", "--policy", str(policy), "--label", "github"]
    assert entry["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "<token>"}

    res = run_assay(
        "mcp", "protect", "claude", "--policy", str(policy), "--log-dir", str(tmp_path / "logs"), env=env, cwd=tmp_path
    )
    assert res.returncode == 0 and "nothing to change" in res.stdout.decode()
    assert "already runs under assay mcp wrap (as protect wrote it)" in res.stdout.decode()

    res = run_assay("mcp", "protect", "claude", "--undo", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert config.read_text() == CLAUDE_DESKTOP
    assert os.listdir(config.parent) == [config.name]  # no backups next to the config
    assert "backup: " in res.stdout.decode() and "/backups/claude_desktop-" in res.stdout.decode()


def test_cli_dry_run_prints_a_diff_and_writes_nothing(home, tmp_path):
    config = claude_config(home)
    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--policy",
        str(tmp_path / "p.yaml"),
        "--init-policy",
        "--dry-run",
        env=make_env(home),
        cwd=tmp_path,
    )
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr
    assert f"would write a starter policy to {tmp_path / 'p.yaml'}" in out
    assert '-      "command": "npx",' in out and f'+      "command": "{ASSAY}",' in out
    assert out.endswith("dry run: nothing was written\n")
    assert config.read_text() == CLAUDE_DESKTOP
    assert not (tmp_path / "p.yaml").exists()
    assert os.listdir(config.parent) == [config.name]


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["bogus", "--policy", "p.yaml"],
            'assay: error: unknown client "bogus". Supported: claude, claude-code, cursor, vscode, windsurf, gemini, codex, zed\n',
        ),
        (
            ["claude"],
            "assay: error: give the policy the wrapped servers enforce: --policy FILE (add --init-policy to create a starter one)\n",
        ),
        (
            ["claude", "--undo", "--policy", "p.yaml"],
            "assay: error: --undo takes no --policy, --init-policy, --log-dir, --observe, --hide-denied-tools, --declared-manifest, --absolute or --log-arguments\n",
        ),
        (
            ["claude", "--undo", "--absolute"],
            "assay: error: --undo takes no --policy, --init-policy, --log-dir, --observe, --hide-denied-tools, --declared-manifest, --absolute or --log-arguments\n",
        ),
        (
            ["windsurf", "--scope", "project", "--policy", "p.yaml"],
            "assay: error: Windsurf has no project config; use --scope user, or --config FILE\n",
        ),
    ],
)
def test_cli_usage_errors(home, tmp_path, args, message):
    (tmp_path / "p.yaml").write_text('version: "2.0"\n')
    res = run_assay("mcp", "protect", *args, env=make_env(home), cwd=tmp_path)
    assert (res.returncode, res.stderr.decode(), res.stdout) == (2, message, b"")


def test_cli_missing_policy_offers_the_starter(home, tmp_path):
    claude_config(home)
    res = run_assay("mcp", "protect", "claude", "--policy", "nope.yaml", env=make_env(home), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.decode() == (
        f"assay: error: policy file {tmp_path / 'nope.yaml'} does not exist; add --init-policy to write a "
        "permissive starter policy there\n"
    )


def test_cli_refuses_unparsable_config_and_broken_policy(home, tmp_path):
    config = claude_config(home)
    good = tmp_path / "p.yaml"
    good.write_text('version: "2.0"\n')
    config.write_text(CLAUDE_DESKTOP.replace("{\n", "{\n  // a comment Claude Desktop would reject\n", 1))
    before = config.read_bytes()
    res = run_assay("mcp", "protect", "claude", "--policy", str(good), env=make_env(home), cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.decode().startswith(
        f"fatal: {config}: invalid JSON: Expecting property name enclosed in double quotes (line 2, column 3)"
    )
    assert config.read_bytes() == before and os.listdir(config.parent) == [config.name]

    config.write_text(CLAUDE_DESKTOP)
    broken = tmp_path / "broken.yaml"
    broken.write_text("tools: [\n")
    res = run_assay("mcp", "protect", "claude", "--policy", str(broken), env=make_env(home), cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.decode().startswith("fatal: the policy does not load, nothing was changed: ")
    assert config.read_text() == CLAUDE_DESKTOP


def test_cli_missing_config_is_refused_with_a_pointer(home, tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    res = run_assay("mcp", "protect", "cursor", "--policy", str(policy), env=make_env(home), cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.decode() == (
        f"fatal: {home}/.cursor/mcp.json does not exist, so there is nothing to protect (add servers to it "
        "first; assay mcp config-path cursor prints an entry)\n"
    )
    assert list(home.iterdir()) == []
    # with --init-policy, nothing is written either (not even the starter policy)
    res = run_assay(
        "mcp",
        "protect",
        "cursor",
        "--policy",
        str(tmp_path / "new.yaml"),
        "--init-policy",
        env=make_env(home),
        cwd=tmp_path,
    )
    assert res.returncode == 1 and not (tmp_path / "new.yaml").exists()


def test_cli_project_scope_and_explicit_config(home, tmp_path):
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "mcp.json").write_text(VSCODE)
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    env = make_env(home)
    res = run_assay(
        "mcp", "protect", "vscode", "--scope", "project", "--policy", str(policy), "--absolute", env=env, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert "Undo with: assay mcp protect vscode --undo --scope project" in res.stdout.decode()
    assert "// Inputs are prompted on first server start" in (tmp_path / ".vscode" / "mcp.json").read_text()
    res = run_assay("mcp", "protect", "vscode", "--undo", "--scope", "project", env=env, cwd=tmp_path)
    assert (tmp_path / ".vscode" / "mcp.json").read_text() == VSCODE

    codex = tmp_path / "elsewhere.toml"
    codex.write_text(CODEX)
    res = run_assay("mcp", "protect", "codex", "--config", str(codex), "--policy", str(policy), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "only the servers above changed: a stdio server's command and args values, a remote server's whole entry"
        in res.stdout.decode()
    )  # the file's figma entry is remote (docs/protect.md, "Remote servers")
    res = run_assay("mcp", "protect", "codex", "--config", str(codex), "--undo", env=env, cwd=tmp_path)
    assert codex.read_bytes() == CODEX.encode()  # byte for byte, also the entry without "args"


def test_help_lists_exit_codes(home, tmp_path):
    res = run_assay("mcp", "protect", "--help", env=make_env(home), cwd=tmp_path)
    assert res.returncode == 0
    assert "Exit codes: 0 done, or nothing to change; 1 refused" in res.stdout.decode()


def test_cli_protect_log_arguments_goes_on_every_line_and_comes_off_again(home, tmp_path):
    """docs/protect.md, "Logging arguments"."""
    config = claude_config(home)
    env = make_env(home)
    (tmp_path / "p.yaml").write_text('version: "2.0"\n')
    res = run_assay(
        "mcp", "protect", "claude", "--policy", str(tmp_path / "p.yaml"), "--log-arguments", env=env, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    servers = json.loads(config.read_text())["mcpServers"]
    wrapped = [e["args"] for e in servers.values() if e.get("command") == str(ASSAY)]
    assert wrapped and all(args[args.index("--") - 1] == "--log-arguments" for args in wrapped)
    res = run_assay("mcp", "protect", "claude", "--policy", str(tmp_path / "p.yaml"), env=env, cwd=tmp_path)
    assert res.returncode == 0 and "updated" in res.stdout.decode()
    assert "--log-arguments" not in config.read_text()
