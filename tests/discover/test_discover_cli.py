"""`assay mcp discover` end to end: the real CLI against a private HOME and real processes
(docs/discover.md)."""

from __future__ import annotations

import json
import os
import pwd
import time

import pytest
import yaml

from tests.discover._discover_helpers import (
    EPOCH,
    config_only_policy,
    make_env,
    run_assay,
    start_server,
    start_wrap,
    write_json,
)

WRAPPED_ARGS = [
    "mcp",
    "wrap",
    "--policy",
    "/etc/assay/policy.yaml",
    "--",
    "npx",
    "-y",
    "@modelcontextprotocol/server-github",
]


@pytest.fixture
def world(tmp_path):
    """HOME, XDG config and a project directory, with one config file of every shape."""
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    cfg = home / ".config"
    proj.mkdir(parents=True)
    files = {
        # valid, one unwrapped server with a credential and one wrapped server
        "claude": write_json(
            cfg / "Claude" / "claude_desktop_config.json",
            {
                "mcpServers": {
                    "filesystem": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                        "env": {"GITHUB_TOKEN": "ghp_secretvalue"},
                    },
                    "github": {"command": "/opt/venv/bin/assay", "args": WRAPPED_ARGS},
                }
            },
        ),
        # malformed JSON
        "cursor": home / ".cursor" / "mcp.json",
        # VS Code user file: JSONC and the "servers" key
        "vscode": cfg / "Code" / "User" / "mcp.json",
        # project Cursor file: one entry wrapped with the interpreter in front, one broken entry
        # (a shell string is never wrapped: tests/discover/test_wrapped_words.py)
        "proj_cursor": write_json(
            proj / ".cursor" / "mcp.json",
            {
                "mcpServers": {
                    "py": {
                        "command": "/v/bin/python3",
                        "args": ["/v/bin/assay", "mcp", "wrap", "--policy", "p.yaml", "--", "python", "s.py"],
                    },
                    "remote-only": {"description": "no command, no url"},
                }
            },
        ),
        # upstream's path: no mcpServers at all (not an error)
        "generic": write_json(home / ".vscode" / "mcp-settings.json", {"editor.fontSize": 12}),
    }
    files["cursor"].parent.mkdir(parents=True)
    files["cursor"].write_text('{"mcpServers": {"x": {"command": "y",}}')
    files["vscode"].parent.mkdir(parents=True)
    files["vscode"].write_text(
        '{\n  // mine\n  "servers": {"py": {"type": "stdio", "command": "python", "args": ["-m", "srv"]},},\n}\n'
    )
    policy = config_only_policy(tmp_path / "policy.yaml")
    env = make_env(home, SOURCE_DATE_EPOCH=EPOCH)
    return {"home": home, "proj": proj, "files": files, "policy": policy, "env": env, "tmp": tmp_path}


def _run(world, *args):
    return run_assay("mcp", "discover", "--policy", str(world["policy"]), *args, env=world["env"], cwd=world["proj"])


def test_D30a_D31_every_config_shape_json(world):
    res = _run(world, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert res.stderr == b""
    assert res.stdout.endswith(b"}\n")
    doc = json.loads(res.stdout)
    assert list(doc) == ["generated_at", "host", "servers", "summary", "errors"]
    assert doc["generated_at"] == "2026-08-17T20:53:20Z"
    assert list(doc["host"]) == ["hostname", "os", "arch"] and doc["host"]["os"] == "linux"
    f = {k: str(v) for k, v in world["files"].items()}
    got = [(s["id"], s["source"]["path"], s["wrapped"], s["policy_status"], s["auth"]) for s in doc["servers"]]
    assert got == [
        ("claude_desktop-filesystem", f["claude"], False, "unmanaged", "api_key"),
        ("claude_desktop-github", f["claude"], True, "managed", "none"),
        ("vscode-py", f["vscode"], False, "unmanaged", "none"),
        ("cursor-py", f["proj_cursor"], True, "managed", "none"),
    ]
    assert doc["servers"][1]["transport"] == {"type": "stdio", "command": "/opt/venv/bin/assay", "args": WRAPPED_ARGS}
    assert doc["servers"][0]["env_vars"] == ["GITHUB_TOKEN"]
    assert b"ghp_secretvalue" not in res.stdout
    assert doc["summary"] == {
        "total": 4,
        "configured": 4,
        "running": 0,
        "managed": 2,
        "unmanaged": 2,
        "with_auth": 1,
        "without_auth": 3,
    }
    assert doc["errors"] == [
        {
            "path": f["cursor"],
            "client": "cursor",
            "error": "invalid JSON: Expecting property name enclosed in double quotes (line 1, column 38)",
        },
        {
            "path": f["proj_cursor"],
            "client": "cursor",
            "error": 'server "remote-only": neither "command" nor "url" is a string',
        },
    ]
    # G3 layout: 2-space indentation, ": " separators, documented member order
    assert res.stdout.decode() == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def test_D10_table_with_wrapped_column_and_warning_lines(world):
    res = _run(world)
    assert res.returncode == 0
    out = res.stdout.decode().splitlines()
    assert out[:4] == [
        "🔍 MCP Server Discovery Report",
        "   Generated: 2026-08-17 20:53:20 UTC",
        out[2],
        "",
    ]
    assert out[2].startswith("   Host: ") and out[2].endswith(
        "(linux/" + os.uname().machine.replace("arm64", "aarch64") + ")"
    )
    assert out[4] == "SERVER ID                      CLIENT          STATUS          AUTH            WRAPPED"
    assert out[5] == "---------                      ------          ------          ----            -------"
    assert out[6] == "claude_desktop-filesystem      claude_desktop  Configured      ApiKey          no"
    assert out[7] == "claude_desktop-github          claude_desktop  Configured      None            yes"
    assert out[-1] == "Summary: Total=4, Managed=2, Unmanaged=2, NoAuth=3"
    err = res.stderr.decode().splitlines()
    assert err == [
        f"warning: skipped {world['files']['cursor']}: invalid JSON: Expecting property name enclosed in double quotes (line 1, column 38)",
        f'warning: skipped {world["files"]["proj_cursor"]}: server "remote-only": neither "command" nor "url" is a string',
    ]


def test_D9_yaml_to_file_leaves_stdout_empty(world):
    out = world["tmp"] / "inventory.yaml"
    res = _run(world, "--format", "yaml", "-o", str(out))
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")
    as_yaml = yaml.safe_load(out.read_text())
    as_json = json.loads(_run(world, "--format", "json").stdout)
    assert as_yaml == as_json
    # JSON written to a file has no trailing newline (docs/discover.md, `--output`); it is replaced whole
    jfile = world["tmp"] / "inventory.json"
    jfile.write_text("old content that is longer than nothing" * 100)
    assert _run(world, "--format", "json", "--output", str(jfile)).returncode == 0
    assert jfile.read_bytes() == json.dumps(as_json, indent=2, ensure_ascii=False).encode()


def test_output_parent_directories_are_created(world):
    # the documented `discover -o .assay/inventory.yaml` then `kill --all --yes` flow, in a fresh directory
    out = world["tmp"] / "fresh" / ".assay" / "inventory.yaml"
    res = _run(world, "--format", "yaml", "-o", str(out))
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")
    assert yaml.safe_load(out.read_text())["servers"]


def test_unwritable_output_is_one_line_exit_2(world):
    blocker = world["tmp"] / "a-file"
    blocker.write_text("")
    res = _run(world, "--format", "json", "-o", str(blocker / "sub" / "dir.json"))
    assert res.returncode == 2
    assert res.stdout == b""
    assert res.stderr.decode().startswith("fatal: cannot write ") and res.stderr.count(b"\n") == 1


@pytest.mark.parametrize(
    ("args", "code", "stderr"),
    [
        ((), 0, ""),
        (("--fail-on", "unmanaged"), 10, "Error: Found 2 unmanaged servers.\n"),
        (("--fail-on", "no_auth"), 11, "Error: Found 3 servers without authentication.\n"),
        (
            ("--fail-on", "no_auth,unmanaged"),
            10,
            "Error: Found 2 unmanaged servers.\nError: Found 3 servers without authentication.\n",
        ),
        (("--fail-on", "bogus", "--fail-on", "no_auth"), 11, "Error: Found 3 servers without authentication.\n"),
    ],
)
def test_D11_fail_on_exit_codes(world, args, code, stderr):
    res = _run(world, "--format", "json", *args)
    assert res.returncode == code
    assert res.stderr.decode() == stderr
    assert json.loads(res.stdout)["summary"]["unmanaged"] == 2  # output is written before the checks


def test_D11_policy_actions(world):
    config_only_policy(world["policy"], on_findings={"unmanaged_server": "warn", "no_auth": "fail"})
    res = _run(world, "--format", "json")
    assert res.returncode == 11
    assert (
        res.stderr.decode() == "Warning: Found 2 unmanaged servers.\nError: Found 3 servers without authentication.\n"
    )


def test_D11_wrapped_servers_are_not_unmanaged_findings(tmp_path):
    home = tmp_path / "h"
    write_json(
        home / ".cursor" / "mcp.json",
        {"mcpServers": {"g": {"command": "assay", "args": WRAPPED_ARGS[:2] + ["--", "x"], "env": {"API_KEY": "k"}}}},
    )
    res = run_assay(
        "mcp",
        "discover",
        "--policy",
        str(config_only_policy(tmp_path / "p.yaml")),
        "--fail-on",
        "unmanaged,no_auth",
        env=make_env(home),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert b"Wrapped" not in res.stderr and b"yes" in res.stdout


def test_D2_policy_methods_and_disabled(world):
    config_only_policy(world["policy"], enabled=False)
    res = _run(world)
    assert res.returncode == 0
    assert res.stdout.decode().endswith("\nNo servers found.\n")
    world["policy"].write_text(
        'version: "2.0"\ndiscovery:\n  enabled: true\n  methods: [config_files, dns, well_known]\n'
    )
    res = _run(world, "--format", "json")
    assert res.returncode == 0
    assert res.stderr.decode() == (
        "warning: discovery method Dns is configured but not implemented; nothing was scanned for it\n"
        "warning: discovery method WellKnown is configured but not implemented; nothing was scanned for it\n"
    )
    world["policy"].write_text("discovery:\n  enabled: yes\n")
    res = _run(world)
    assert res.returncode == 2 and res.stdout == b""
    assert res.stderr.startswith(b"fatal: ") and res.stderr.count(b"\n") == 1


def test_D30a_unreadable_files_are_reported_never_hang(tmp_path):
    """A FIFO at a config path would block a naive reader; a directory cannot be read."""
    home = tmp_path / "h"
    (home / ".cursor").mkdir(parents=True)
    os.mkfifo(home / ".cursor" / "mcp.json")
    (home / ".config" / "Claude" / "claude_desktop_config.json").mkdir(parents=True)
    bad = home / ".vscode" / "mcp-settings.json"
    bad.parent.mkdir()
    bad.write_bytes(b'{"mcpServers": {"\xff": {}}}')
    res = run_assay(
        "mcp",
        "discover",
        "--format",
        "json",
        "--policy",
        str(config_only_policy(tmp_path / "p.yaml")),
        env=make_env(home),
        cwd=tmp_path,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert [(e["client"], e["error"]) for e in json.loads(res.stdout)["errors"]] == [
        ("claude_desktop", "not a regular file"),
        ("cursor", "not a regular file"),
        ("generic", "not valid UTF-8 (byte 17)"),
    ]


def test_same_file_is_read_once(tmp_path):
    """Run from HOME: the project .cursor/mcp.json is the user one, listed once."""
    home = tmp_path / "h"
    write_json(home / ".cursor" / "mcp.json", {"mcpServers": {"a": {"command": "srv"}}})
    res = run_assay(
        "mcp",
        "discover",
        "--format",
        "json",
        "--policy",
        str(config_only_policy(tmp_path / "p.yaml")),
        env=make_env(home),
        cwd=home,
    )
    assert [s["id"] for s in json.loads(res.stdout)["servers"]] == ["cursor-a"]


def test_D7_D30a_running_processes(tmp_path):
    """A plain server is listed unwrapped; a running `assay mcp wrap` is listed once, wrapped, and
    the server it runs is not listed again. Config entries come first (docs/discover.md,
    "Output")."""
    home = tmp_path / "h"
    write_json(home / ".cursor" / "mcp.json", {"mcpServers": {"a": {"command": "srv"}}})
    server = start_server(tmp_path)
    wrap = start_wrap(tmp_path)
    try:
        before = int(time.time())
        res = run_assay("mcp", "discover", "--format", "json", env=make_env(home), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        ids = [s["id"] for s in doc["servers"]]
        assert ids[0] == "cursor-a"
        running = [s for s in doc["servers"] if s["status"] == "running"]
        assert all(s["source"]["type"] == "running_process" for s in running)
        pids = [s["source"]["pid"] for s in running]
        assert pids == sorted(pids)
        by_pid = {s["source"]["pid"]: s for s in running}
        assert server.pid in by_pid and wrap.pid in by_pid
        assert wrap.child not in by_pid
        plain = by_pid[server.pid]
        assert plain["id"] == f"proc-{server.pid}" and plain["name"] is None
        assert plain["wrapped"] is False and plain["policy_status"] == "unmanaged"
        assert plain["source"]["cmdline"].endswith("fake-mcp-server.py")
        assert plain["source"]["user"] == pwd.getpwuid(os.getuid()).pw_name
        assert before - 120 <= int(plain["source"]["started_at"]) <= before + 5
        wrapped = by_pid[wrap.pid]
        assert wrapped["wrapped"] is True and wrapped["policy_status"] == "managed"
        assert " mcp wrap --policy p.yaml -- " in wrapped["source"]["cmdline"]
        assert doc["summary"]["running"] == len(running)
    finally:
        server.close()
        wrap.close()


def test_D1_format_is_validated_by_the_parser(tmp_path):
    res = run_assay("mcp", "discover", "--format", "xml", env=make_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == b""
    assert res.stderr.startswith(b"assay: error: ") and res.stderr.count(b"\n") == 1
