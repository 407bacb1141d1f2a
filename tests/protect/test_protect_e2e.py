"""End to end, as a Claude Desktop user would: a config pointing at a real (tiny) Python MCP
server, `assay mcp protect --init-policy`, then the rewritten command line from the config is
started by the MCP Python SDK client (a real process tree: assay mcp wrap -> the server), a tool
call is answered through the starter policy and logged, and `--undo` gives back the original
bytes."""

from __future__ import annotations

import json
import sys
import textwrap

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import ASSAY
from tests.discover._discover_helpers import make_env, run_assay

TINY_SERVER = textwrap.dedent(
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("tiny-notes", version="1.0.0")

    @server.tool()
    def add(a: int, b: int) -> str:
        \"\"\"Add two numbers.\"\"\"
        return f"sum={a + b}"

    if __name__ == "__main__":
        server.run()
    """
)


async def test_protect_launch_call_and_undo(tmp_path):
    home = tmp_path / "home"
    server = tmp_path / "tiny_server.py"
    server.write_text(TINY_SERVER)
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    original = (
        json.dumps(
            {
                "globalShortcut": "Alt+Space",
                "mcpServers": {
                    "tiny": {"command": sys.executable, "args": [str(server)], "env": {"TINY_TOKEN": "t0ken"}},
                    "remote": {"url": "https://example.com/mcp"},
                },
            },
            indent=2,
        )
        + "\n"
    )
    config.write_text(original)
    env = make_env(home)
    policy = home / ".config" / "assay" / "policy.yaml"
    logs = tmp_path / "logs"

    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--policy",
        str(policy),
        "--init-policy",
        "--log-dir",
        str(logs),
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    entry = json.loads(config.read_text())["mcpServers"]["tiny"]
    assert entry["command"] == str(ASSAY)
    assert entry["args"][entry["args"].index("--") + 1 :] == [sys.executable, str(server)]

    # Start exactly what Claude Desktop would start: command, args and env from the config.
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry["env"]}, cwd=str(tmp_path)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["add"]
            result = await session.call_tool("add", {"a": 2, "b": 40})
            assert result.is_error is False
            assert result.content[0].text == "sum=42"

    logged = [json.loads(line) for line in (logs / "claude_desktop-tiny.decisions.ndjson").read_text().splitlines()]
    # docs/wrap-records.md, "The client" and "Tools seen"
    assert [e["type"] for e in logged] == ["assay.client.capabilities", "assay.tool.listed", "assay.tool.decision"]
    assert logged[0]["data"]["declared_in"] == "initialize" and logged[0]["data"]["elicitation"] == "none"
    assert logged[1]["data"]["tool"] == "add" and logged[1]["source"] == "assay://protect/claude_desktop/tiny"
    decisions = logged[2:]
    assert len(decisions) == 1
    assert decisions[0]["source"] == "assay://protect/claude_desktop/tiny"
    assert decisions[0]["data"]["tool"] == "add"
    assert decisions[0]["data"]["decision"] in ("allow", "allow_with_warning")

    res = run_assay("mcp", "protect", "claude", "--undo", env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert config.read_bytes() == original.encode()
