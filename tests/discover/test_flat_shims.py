"""The hidden deprecated flat forms `assay discover` / `assay kill` (docs/discover.md and
docs/kill.md, "Deprecated flat form"): same stdout, exit code and artifacts as the `assay mcp`
forms, byte for byte, plus exactly one warning line, on stderr only."""

from __future__ import annotations

import pytest

from tests.discover._discover_helpers import (
    EPOCH,
    config_only_policy,
    make_env,
    run_assay,
    start_plain,
    start_server,
    unused_pid,
    write_json,
)

DISCOVER_WARNING = b"warning: `assay discover` is deprecated; use `assay mcp discover` instead\n"
KILL_WARNING = b"warning: `assay kill` is deprecated; use `assay mcp kill` instead\n"


@pytest.fixture
def setup(tmp_path):
    home = tmp_path / "home"
    write_json(
        home / ".config" / "Claude" / "claude_desktop_config.json",
        {
            "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]},
                "w": {"command": "assay", "args": ["mcp", "wrap", "--", "srv"], "env": {"API_KEY": "v"}},
            }
        },
    )
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text("{not json")
    policy = config_only_policy(tmp_path / "policy.yaml")
    return tmp_path, make_env(home, SOURCE_DATE_EPOCH=EPOCH), str(policy)


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--format", "json"),
        ("--format", "yaml", "--fail-on", "unmanaged"),
        ("--format", "json", "--fail-on", "no_auth", "--local"),
        ("--fail-on", "unmanaged,no_auth"),
    ],
)
def test_H1_H3_discover_shim_matches_canonical(setup, args):
    tmp, env, policy = setup
    canonical = run_assay("mcp", "discover", "--policy", policy, *args, env=env, cwd=tmp)
    shim = run_assay("discover", "--policy", policy, *args, env=env, cwd=tmp)
    assert shim.stdout == canonical.stdout
    assert shim.returncode == canonical.returncode
    assert shim.stderr == DISCOVER_WARNING + canonical.stderr
    assert DISCOVER_WARNING not in canonical.stderr and b"deprecated" not in shim.stdout


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_H1_discover_shim_artifacts_identical(setup, fmt):
    tmp, env, policy = setup
    a, b = tmp / f"canonical.{fmt}", tmp / f"shim.{fmt}"
    canonical = run_assay(
        "mcp", "discover", "--policy", policy, "--format", fmt, "-o", str(a), "--fail-on", "unmanaged", env=env, cwd=tmp
    )
    shim = run_assay(
        "discover", "--policy", policy, "--format", fmt, "-o", str(b), "--fail-on", "unmanaged", env=env, cwd=tmp
    )
    assert (shim.returncode, canonical.returncode) == (10, 10)
    assert shim.stdout == canonical.stdout == b""
    assert a.read_bytes() == b.read_bytes() and len(a.read_bytes()) > 100
    assert shim.stderr == DISCOVER_WARNING + canonical.stderr


def test_H4_kill_shim_with_no_arguments(tmp_path):
    env = make_env(tmp_path)
    shim = run_assay("kill", env=env, cwd=tmp_path)
    canonical = run_assay("mcp", "kill", env=env, cwd=tmp_path)
    assert shim.returncode == canonical.returncode == 2
    assert shim.stdout == canonical.stdout == b""
    assert canonical.stderr == b"fatal: Provide at least one target, or use --all.\n"
    assert shim.stderr == KILL_WARNING + canonical.stderr


@pytest.mark.parametrize("args", [("--all",), (str(unused_pid()),), ("PLAIN",), ("no-such-name",)])
def test_H1_kill_shim_failures_match(tmp_path, args):
    env = make_env(tmp_path)
    plain = start_plain(tmp_path)  # not an MCP server: both forms refuse it, it survives (docs/kill.md, "Safety")
    try:
        args = tuple(str(plain.pid) if a == "PLAIN" else a for a in args)
        shim = run_assay("kill", *args, env=env, cwd=tmp_path)
        canonical = run_assay("mcp", "kill", *args, env=env, cwd=tmp_path)
        assert shim.returncode == canonical.returncode != 0
        assert shim.stdout == canonical.stdout
        assert shim.stderr == KILL_WARNING + canonical.stderr
        assert plain.proc.poll() is None
    finally:
        plain.close()


def test_H1_kill_shim_kills_like_canonical(tmp_path):
    """Two identical servers, one killed per form: same output once the pid is named alike."""
    env = make_env(tmp_path)
    s1, s2 = start_server(tmp_path, "--child"), start_server(tmp_path, "--child")
    try:
        canonical = run_assay("mcp", "kill", str(s1.pid), "--kill-children", env=env, cwd=tmp_path)
        shim = run_assay("kill", str(s2.pid), "--kill-children", env=env, cwd=tmp_path)
        assert shim.returncode == canonical.returncode == 0
        assert canonical.stdout.replace(str(s1.pid).encode(), b"PID") == shim.stdout.replace(
            str(s2.pid).encode(), b"PID"
        )
        assert b"children killed: 1" in shim.stdout
        assert shim.stderr == KILL_WARNING and canonical.stderr == b""
        assert s1.proc.wait(timeout=30) == s2.proc.wait(timeout=30)
    finally:
        s1.close()
        s2.close()


def test_H2_shims_are_hidden(tmp_path):
    env = make_env(tmp_path)
    top = run_assay("--help", env=env, cwd=tmp_path).stdout.decode()
    assert " mcp " in top
    assert " discover " not in top and " kill " not in top
    sub = run_assay("mcp", "--help", env=env, cwd=tmp_path).stdout.decode()
    assert " discover " in sub and " kill " in sub and " config-path " in sub


@pytest.mark.parametrize(
    "args",
    [
        ("discover", "--format", "xml"),
        ("discover", "--bogus"),
        ("kill", "--mode", "x", "1"),
        ("kill", "--grace", "later", "1"),
        ("kill", "--bogus"),
    ],
)
def test_H3_usage_errors_come_after_the_warning(tmp_path, args):
    """The warning is printed on every use, a usage error included; the error line and the exit
    status are those of the `assay mcp` form."""
    env = make_env(tmp_path)
    res = run_assay(*args, env=env, cwd=tmp_path)
    canonical = run_assay("mcp", *args, env=env, cwd=tmp_path)
    warning = DISCOVER_WARNING if args[0] == "discover" else KILL_WARNING
    assert res.returncode == canonical.returncode == 2
    assert res.stdout == canonical.stdout == b""
    assert canonical.stderr.startswith(b"assay: error: ") and canonical.stderr.count(b"\n") == 1
    assert res.stderr == warning + canonical.stderr
