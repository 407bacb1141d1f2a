"""End to end: a hostile server (tests/wrap/fixtures/hostile_server.py, one trick per mode)
through `assay mcp wrap`, driven by the official Python SDK client and the TypeScript SDK v1
client; and denied calls of the real `server-filesystem` / `server-memory` (their tools declare
an `outputSchema`) with the TS SDK v1, TS SDK v2 and Python clients (docs/wrap.md, "Tool pins",
"Deny replies", "Dropped server responses").

The swapped `read_file` must never execute: the fixture appends every tools/call it receives to
an execution log, which the tests read after the run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import (
    E2E,
    NODE_MODULES,
    REPO,
    RUN_TIMEOUT,
    WrapRun,
    assert_all_ended,
    assert_denied,
    run_ts_client,
)

HOSTILE_SERVER = REPO / "tests" / "wrap" / "fixtures" / "hostile_server.py"
TS_V1_CLIENT = E2E / "ts_v1_client.mjs"
FILESYSTEM_SERVER = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
MEMORY_SERVER = NODE_MODULES / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
LABEL = "e2e-server"


def _fixture():
    spec = importlib.util.spec_from_file_location("hostile_server", HOSTILE_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOSTILE = _fixture()

# What the Python SDK client can read at all: pydantic's JSON reader refuses nesting beyond its
# recursion limit and lone surrogates, the stdio reader decodes strictly (invalid UTF-8), and it
# does not match "0x2" to request 2. Those tricks are aimed at Node hosts and run with TS v1.
PYTHON_MODES = ("escaped_name", "string_id", "duplicate_evil_first", "huge_int", "rugpull")


def hostile_policy(tmp: Path) -> Path:
    from assay.policy import tool_identity

    schema_hash, meta_hash = tool_identity(HOSTILE.HONEST)
    path = tmp / "hostile.yaml"
    path.write_text(
        'version: "2.0"\ntools:\n  allow: ["read_file", "echo"]\n  deny: ["exec"]\n'
        "schemas:\n  read_file: {type: object}\n  echo: {type: object}\n"
        f"tool_pins:\n  read_file:\n    server_id: {LABEL}\n    tool_name: read_file\n"
        f'    schema_hash: "{schema_hash}"\n    meta_hash: "{meta_hash}"\n'
    )
    return path


def hostile_run(tmp: Path, mode: str) -> tuple[WrapRun, Path]:
    exec_log = tmp / "executed.log"
    exec_log.write_text("")
    run = WrapRun(tmp, hostile_policy(tmp), [sys.executable, str(HOSTILE_SERVER), mode, str(exec_log)], label=LABEL)
    return run, exec_log


def steps_for(mode: str) -> list[dict]:
    call_read = {"op": "call", "name": "read_file", "arguments": {"path": "/workspace/a"}}
    if mode == "rugpull":
        return [{"op": "list"}, call_read, {"op": "list"}, call_read]
    if mode in HOSTILE.FORGE_MODES:
        return [
            {"op": "list"},
            {"op": "call", "name": "exec", "arguments": {}},
            {"op": "call", "name": "echo", "arguments": {"m": 1}},
        ]
    return [{"op": "list"}, call_read]


async def run_ts_v1(node: str, run: WrapRun, steps: list[dict], env: dict[str, str]) -> list[dict]:
    spec = {"command": run.argv[0], "args": run.argv[1:], "steps": steps, "timeoutMs": int(RUN_TIMEOUT * 1000)}
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_V1_CLIENT)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(E2E),
            env=env,
        )
    run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"ts_v1_client exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{run.stderr_text()}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected"] + [s["op"] for s in steps] + ["closed"], out
    return lines[1:]


async def run_python(run: WrapRun, steps: list[dict], env: dict[str, str]) -> list[dict]:
    """The same steps with the Python SDK's ClientSession, as plain dicts."""
    results: list[dict] = []
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for step in steps:
                    if step["op"] == "list":
                        listed = await session.list_tools()
                        results.append({"kind": "list", "tools": [t.name for t in listed.tools]})
                        continue
                    r = await session.call_tool(step["name"], step["arguments"])
                    results.append(
                        {
                            "kind": "call",
                            "name": step["name"],
                            "is_error": r.is_error,
                            "structuredContent": r.structured_content,
                            "texts": [getattr(c, "text", "") for c in r.content],
                        }
                    )
    return results


def assert_swapped_tool_never_ran(mode: str, results: list[dict], run: WrapRun, exec_log: Path) -> None:
    calls = [r for r in results if r["kind"] == "call"]
    assert all("thrown" not in c for c in calls), calls
    last = calls[-1]
    assert last["name"] == "read_file"
    assert_denied("read_file", last["is_error"], last["structuredContent"], "".join(last["texts"]), "E_TOOL_DRIFT")
    executed = exec_log.read_text().splitlines()
    assert "read_file evil" not in executed, executed
    assert executed == (["read_file honest"] if mode == "rugpull" else []), executed
    decision = run.decisions()[-1]
    assert decision["tool"] == "read_file" and decision["reason_code"] == "P_TOOL_DRIFT", decision
    assert decision["reason"].startswith("Tool integrity failure:"), decision


@pytest.mark.parametrize("mode", HOSTILE.PIN_MODES)
async def test_ts_v1_client_swapped_tool_never_runs(node, tmp_path, base_env, mode):
    run, exec_log = hostile_run(tmp_path, mode)
    results = await run_ts_v1(node, run, steps_for(mode), base_env)
    assert results[0]["kind"] == "list" and "read_file" in results[0].get("tools", []), results
    assert_swapped_tool_never_ran(mode, results, run, exec_log)
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)


@pytest.mark.parametrize("mode", PYTHON_MODES)
async def test_python_client_swapped_tool_never_runs(tmp_path, base_env, mode):
    run, exec_log = hostile_run(tmp_path, mode)
    results = await run_python(run, steps_for(mode), base_env)
    assert "read_file" in results[0]["tools"], results
    assert_swapped_tool_never_ran(mode, results, run, exec_log)


def assert_forgeries_reported(mode: str, run: WrapRun, results: list[dict], exec_log: Path) -> None:
    calls = [r for r in results if r["kind"] == "call"]
    exec_call, echo_call = calls
    assert_denied(
        "exec", exec_call["is_error"], exec_call["structuredContent"], "".join(exec_call["texts"]), "E_TOOL_DENIED"
    )
    assert echo_call["texts"] == ["ran echo"] and not echo_call["is_error"]
    assert exec_log.read_text().splitlines() == ["echo -"]  # the denied exec never reached it
    stderr = run.stderr_text()
    dropped = [line for line in stderr.splitlines() if "dropped a server response" in line]
    assert dropped, stderr
    assert all("FORGED" not in line for line in dropped)
    if mode == "forge_unsent":
        assert any("(id 4242)" in line for line in dropped) and any('(id "x-unsent")' in line for line in dropped)


@pytest.mark.parametrize("mode", HOSTILE.FORGE_MODES)
async def test_ts_v1_client_forged_answers_are_reported(node, tmp_path, base_env, mode):
    run, exec_log = hostile_run(tmp_path, mode)
    results = await run_ts_v1(node, run, steps_for(mode), base_env)
    assert_forgeries_reported(mode, run, results[:-1], exec_log)


@pytest.mark.parametrize("mode", HOSTILE.FORGE_MODES)
async def test_ts_v1_client_never_receives_forged_answers(node, tmp_path, base_env, mode):
    """The TS SDK reports every response it cannot match through onerror: with the forged
    answers dropped by wrap there is none."""
    run, exec_log = hostile_run(tmp_path, mode)
    results = await run_ts_v1(node, run, steps_for(mode), base_env)
    closed = results[-1]
    assert closed["errors"] == [], closed


@pytest.mark.parametrize("mode", HOSTILE.FORGE_MODES)
async def test_python_client_forged_answers_are_reported(tmp_path, base_env, mode):
    run, exec_log = hostile_run(tmp_path, mode)
    results = await run_python(run, steps_for(mode), base_env)
    assert_forgeries_reported(mode, run, results, exec_log)


# --- real servers whose tools declare an outputSchema -------------------------------------------

FS_POLICY = """version: "2.0"
tools:
  allow: ["list_allowed_directories", "read_text_file", "read_graph"]
  deny: ["write_file", "delete_entities"]
schemas:
  list_allowed_directories: {type: object}
  read_text_file: {type: object}
  read_graph: {type: object}
"""


def real_server_run(tmp: Path, server: str) -> WrapRun:
    policy = tmp / "real.yaml"
    policy.write_text(FS_POLICY)
    if server == "filesystem":
        root = tmp / "root"
        root.mkdir()
        argv = ["node", str(FILESYSTEM_SERVER), str(root)]
    else:
        argv = ["node", str(MEMORY_SERVER)]
    return WrapRun(tmp, policy, argv)


REAL_STEPS = {
    "filesystem": (
        [
            {"op": "list"},
            {"op": "call", "name": "list_allowed_directories", "arguments": {}},
            {"op": "call", "name": "write_file", "arguments": {"path": "x", "content": "y"}},
        ],
        "write_file",
    ),
    "memory": (
        [
            {"op": "list"},
            {"op": "call", "name": "read_graph", "arguments": {}},
            {"op": "call", "name": "delete_entities", "arguments": {"entityNames": ["a"]}},
        ],
        "delete_entities",
    ),
}


@pytest.mark.parametrize("server", ["filesystem", "memory"])
async def test_ts_v1_client_deny_of_an_output_schema_tool_is_a_normal_error_result(node, tmp_path, base_env, server):
    """The TS SDK v1 validated wrap's structuredContent against the tool's outputSchema and
    threw MCP error -32602 for every deny; now the deny is an isError result naming the code."""
    run = real_server_run(tmp_path, server)
    steps, denied = REAL_STEPS[server]
    results = await run_ts_v1(node, run, steps, base_env)
    allowed, deny = results[1], results[2]
    assert "thrown" not in allowed and allowed["is_error"] is False, allowed
    assert "thrown" not in deny, f"the TS SDK v1 refused wrap's deny: {deny['thrown']}"
    assert_denied(denied, deny["is_error"], deny["structuredContent"], "".join(deny["texts"]), "E_TOOL_DENIED")
    assert deny["structuredContent"] is None
    assert "E_TOOL_DENIED" in deny["texts"][1]


async def test_ts_v2_client_deny_of_a_server_filesystem_tool(node, tmp_path, base_env):
    run = real_server_run(tmp_path, "filesystem")
    calls = [
        {"name": "list_allowed_directories", "arguments": {}},
        {"name": "write_file", "arguments": {"path": "x", "content": "y"}},
    ]
    out = await run_ts_client(node, run, calls, base_env)
    allowed, deny = out["calls"]
    assert "thrown" not in allowed and allowed["is_error"] is False, allowed
    assert "thrown" not in deny, deny
    assert_denied("write_file", deny["is_error"], deny["structuredContent"], deny["text"], "E_TOOL_DENIED")
    assert "E_TOOL_DENIED" in deny["text"]


async def test_python_client_deny_of_a_server_filesystem_tool(tmp_path, base_env):
    run = real_server_run(tmp_path, "filesystem")
    steps, _ = REAL_STEPS["filesystem"]
    results = await run_python(run, steps, base_env)
    allowed, deny = results[1], results[2]
    assert allowed["is_error"] is False, allowed
    assert_denied("write_file", deny["is_error"], deny["structuredContent"], "".join(deny["texts"]), "E_TOOL_DENIED")
    assert deny["structuredContent"] is None
