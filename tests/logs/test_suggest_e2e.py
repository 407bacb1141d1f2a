"""`assay mcp policy suggest` over an observed session of the real filesystem server
(docs/log.md, "assay mcp policy suggest"): a Claude Desktop config protected with `--observe
--log-arguments`, a session driven by the MCP Python SDK, then the suggested policy loads, passes
`policy check`, and, once protect puts it in force, allows every call the session made and denies
a write and a read it never saw."""

from __future__ import annotations

import json
from pathlib import Path

import mcp.types as types
import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.discover._discover_helpers import make_env, run_assay

FS_SERVER = (
    Path(__file__).resolve().parents[1]
    / "e2e"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
    / "dist"
    / "index.js"
)
PERMISSIVE = 'version: "2.0"\nenforcement: { unconstrained_tools: warn }\n'


async def _session(entry: dict, env: dict[str, str], cwd: Path, ws: Path, extra: bool) -> dict[str, object]:
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(cwd)
    )
    results: dict[str, object] = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            results["tools"] = {t.name for t in tools.tools}
            calls = [
                ("read_text_file", {"path": str(ws / "a.txt")}),
                ("list_directory", {"path": str(ws)}),
                ("read_text_file", {"path": str(ws / "sub" / "b.txt")}),
            ]
            if extra:
                calls += [
                    ("write_file", {"path": str(ws / "c.txt"), "content": "x"}),
                    ("read_text_file", {"path": str(ws / "sub" / ".." / ".." / "secret.txt")}),
                ]
            for i, (name, args) in enumerate(calls):
                r = await session.call_tool(name, args)
                text = " ".join(getattr(c, "text", "") for c in r.content)
                results[f"{i}:{name}"] = (bool(r.is_error), text)
    return results


def test_suggest_from_an_observed_filesystem_session(tmp_path):
    home = tmp_path / "home"
    ws = home / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha")
    (ws / "sub" / "b.txt").write_text("beta")
    (home / "secret.txt").write_text("do not read")
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"fs": {"command": "node", "args": [str(FS_SERVER), str(ws)]}}}))
    permissive = tmp_path / "permissive.yaml"
    permissive.write_text(PERMISSIVE)
    logs = tmp_path / "logs"
    env = make_env(home)
    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--config",
        str(config),
        "--policy",
        str(permissive),
        "--observe",
        "--log-arguments",
        "--log-dir",
        str(logs),
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    entry = json.loads(config.read_text())["mcpServers"]["fs"]
    observed = trio.run(_session, entry, env, tmp_path, ws, False)
    assert "write_file" in observed["tools"]  # type: ignore[operator]
    assert all(not v[0] for k, v in observed.items() if k != "tools")  # type: ignore[index]

    tight = tmp_path / "tight.yaml"
    res = run_assay("mcp", "policy", "suggest", str(logs), "--out", str(tight), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert b"replayed 3 observed calls against it: none denied" in res.stderr
    text = tight.read_text()
    assert 'within: ["~/ws"]' in text  # written for any user's home
    assert '"write_file"' in text and "never called" in text
    res = run_assay("mcp", "policy", "check", str(tight), "--strict", env=env, cwd=tmp_path)
    assert res.returncode == 0, (res.stdout, res.stderr)
    # create-new: a second run does not overwrite it
    res = run_assay("mcp", "policy", "suggest", str(logs), "--out", str(tight), env=env, cwd=tmp_path)
    assert res.returncode == 2 and tight.read_text() == text

    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--config",
        str(config),
        "--policy",
        str(tight),
        "--log-dir",
        str(logs),
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    entry = json.loads(config.read_text())["mcpServers"]["fs"]
    enforced = trio.run(_session, entry, env, tmp_path, ws, True)
    assert [enforced[k][0] for k in ("0:read_text_file", "1:list_directory", "2:read_text_file")] == [False] * 3  # type: ignore[index]
    assert enforced["0:read_text_file"][1] == "alpha"  # type: ignore[index]
    write_error, write_text = enforced["3:write_file"]  # type: ignore[misc]
    assert write_error and "E_TOOL_NOT_ALLOWED" in write_text
    escape_error, escape_text = enforced["4:read_text_file"]  # type: ignore[misc]
    assert escape_error and "E_PATH_CONFINEMENT" in escape_text
    assert not (ws / "c.txt").exists()


async def _writer_session(entry: dict, env: dict[str, str], cwd: Path, ws: Path, elicits: bool) -> None:
    """A session that reads and writes, with a client that declares elicitation (its callback
    would accept) or not."""

    async def elicit(ctx, params):  # never asked: the observing wrap has no approvals
        return types.ElicitResult(action="accept", content={})

    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}, cwd=str(cwd)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **({"elicitation_callback": elicit} if elicits else {})) as session:
            await session.initialize()
            await session.list_tools()
            for name, args in (
                ("read_text_file", {"path": str(ws / "a.txt")}),
                ("write_file", {"path": str(ws / "c.txt"), "content": "x"}),
            ):
                r = await session.call_tool(name, args)
                assert not r.is_error, r


@pytest.mark.parametrize("elicits", [False, True])
def test_suggest_asks_approval_only_of_a_client_that_can_answer(tmp_path, elicits):
    """The server annotates write_file destructive. Its wrap records what the real SDK client
    declared (docs/wrap-records.md, "The client"): with elicitation, write_file needs approval
    and the summary says what a client without it gets; without, write_file is left unasked (it
    would be refused on every call) and the file and the summary say why."""
    home = tmp_path / "home"
    ws = home / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("alpha")
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"fs": {"command": "node", "args": [str(FS_SERVER), str(ws)]}}}))
    permissive = tmp_path / "permissive.yaml"
    permissive.write_text(PERMISSIVE)
    logs = tmp_path / "logs"
    env = make_env(home)
    res = run_assay(
        "mcp",
        "protect",
        "claude",
        "--config",
        str(config),
        "--policy",
        str(permissive),
        "--observe",
        "--log-dir",
        str(logs),
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    entry = json.loads(config.read_text())["mcpServers"]["fs"]
    trio.run(_writer_session, entry, env, tmp_path, ws, elicits)
    recorded = [
        json.loads(line)["data"]
        for f in logs.glob("*.ndjson")
        for line in f.read_text().splitlines()
        if '"assay.client.capabilities"' in line
    ]
    assert [(r["declared_in"], r["elicitation"]) for r in recorded] == [("initialize", "form" if elicits else "none")]

    tight = tmp_path / "tight.yaml"
    res = run_assay("mcp", "policy", "suggest", str(logs), "--out", str(tight), env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    text, said = tight.read_text(), res.stderr.decode()
    assert "docs/" not in text and "assay mcp policy --help" in text and text.endswith("\n")
    assert '#   "read_text_file": no call had recorded arguments (wrap ran without --log-arguments)' in text
    if elicits:
        assert 'approval_required:\n    - "write_file"' in text and "approval_fallback: deny" in text
        assert 'assay: approval needed for "write_file"' in said and "approval_fallback: deny" in said
    else:
        assert "\n  approval_required:" not in text and "approval_fallback:" not in text
        assert '#   "write_file" (client "mcp")' in text
        assert 'assay: left without approval though annotated destructive: "write_file"' in said
    res = run_assay("mcp", "policy", "check", str(tight), "--strict", env=env, cwd=tmp_path)
    assert res.returncode == 0, (res.stdout, res.stderr)
    # what the comments promise, the help says
    res = run_assay("mcp", "policy", "--help", env={**env, "COLUMNS": "200"}, cwd=tmp_path)
    shown = res.stdout.decode()
    for word in (
        "tools.allow",
        "=name",
        "approval_required",
        "approval_fallback",
        "elicitation",
        "schemas",
        "unconstrained_tools",
        "path_confinement",
    ):
        assert word in shown, word
