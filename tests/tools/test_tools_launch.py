"""Which entries `assay mcp tools CLIENT` starts (docs/tools.md, "A client's servers"): an entry
holding a value only the client can fill in (VS Code's `${input:...}` and `${command:...}`) is
not started but skipped, saying which value and where; protected or not."""

from __future__ import annotations

import json

import pytest

from assay import clients
from assay.clients import protect as p
from assay.mcpclient.launch import launches
from tests.discover._discover_helpers import make_env, run_assay

VSCODE = {
    "inputs": [{"type": "promptString", "id": "api-key", "password": True}],
    "servers": {
        "notes": {
            "type": "http",
            "url": "https://h.example/mcp",
            "headers": {"Authorization": "Bearer ${input:api-key}"},
        },
        "local": {"command": "npx", "args": ["srv", "--token", "${input:api-key}"]},
        "cmd": {"command": "srv", "env": {"PICKED": "${command:pickFolder}"}},
        "plain": {"command": "srv", "env": {"HOME_DIR": "${env:HOME}", "X": "${input"}},
    },
}


def _location(path: str = "/w/.vscode/mcp.json") -> clients.ConfigLocation:
    return clients.pick_location("vscode", "user", path, "linux", "/h", {}, "/w")


@pytest.mark.parametrize("protected", [False, True])
def test_a_value_only_the_client_fills_in_is_said_and_the_entry_is_not_started(protected):
    loc = _location()
    text = json.dumps(VSCODE, indent=2)
    if protected:
        text = p.protect_text(text, loc, p.WrapOptions("/opt/assay", "/p.yaml")).text
    found = {f.name: f for f in launches(text.encode(), loc)[0]}
    tail = (
        ", a value only VS Code can fill in (it asks for it when it starts the server); assay mcp tools cannot, "
        "so it does not start the server"
    )
    if protected:
        assert found["notes"].skipped == "its header Authorization (env ASSAY_HEADER_1) holds ${input:api-key}" + tail
        assert found["local"].skipped == "its args[10] holds ${input:api-key}" + tail
    else:
        assert found["notes"].skipped.startswith("a remote server")
        assert found["local"].skipped == "its args[2] holds ${input:api-key}" + tail
    assert found["cmd"].skipped == "its env PICKED holds ${command:pickFolder}" + tail
    assert found["plain"].skipped is None  # ${env:...} and a broken reference are not the client's alone


def test_the_cli_says_it_and_starts_nothing(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"servers": {"local": {"command": str(tmp_path / "never-run"), "args": ["${input:api-key}"]}}})
    )
    res = run_assay("mcp", "tools", "vscode", "--config", str(config), env=make_env(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == (
        'server "local": skipped: its args[0] holds ${input:api-key}, a value only VS Code can fill in (it asks '
        "for it when it starts the server); assay mcp tools cannot, so it does not start the server\n"
    )


def test_a_client_config_that_cannot_be_read_is_fatal(tmp_path):
    # docs/tools.md, "Exit": a client config that cannot be read is exit 2, one fatal line, never a traceback
    for name, text in (
        ("bad.json", "{"),
        ("deep.json", '{"servers": {"s": {"command": "x", "env": {"A": ' + "[" * 3000 + "]" * 3000 + "}}}}"),
    ):
        config = tmp_path / name
        config.write_text(text)
        res = run_assay("mcp", "tools", "vscode", "--config", str(config), env=make_env(tmp_path), cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        assert res.stderr.decode().startswith(f"fatal: {config}: invalid JSON") and res.stderr.count(b"\n") == 1


@pytest.mark.parametrize(
    "client,name,text",
    [
        ("codex", "config.toml", '[mcp_servers.s]\ncommand = "npx"\nenv = { A = ' + "[" * 3000 + "]" * 3000 + " }\n"),
        (
            "cursor",
            "mcp.json",
            '{"mcpServers": {"s": {"command": "npx", "env": {"A": ' + "[" * 3000 + "]" * 3000 + "}}}}",
        ),
    ],
)
def test_a_config_nested_too_deeply_is_one_line_for_protect_and_tools(tmp_path, client, name, text):
    config = tmp_path / name
    config.write_text(text)
    policy = tmp_path / "p.yaml"
    policy.write_text('version: "2.0"\n')
    env = make_env(tmp_path)
    res = run_assay("mcp", "protect", client, "--config", str(config), "--policy", str(policy), env=env, cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.decode().startswith("fatal: ") and b"Traceback" not in res.stderr
    assert res.stderr.decode().rstrip().endswith("nested too deeply") and res.stderr.count(b"\n") == 1
    res = run_assay("mcp", "tools", client, "--config", str(config), env=env, cwd=tmp_path)
    assert res.returncode == 2 and b"Traceback" not in res.stderr and res.stderr.count(b"\n") == 1
