"""End to end: the official `mcp` Python SDK client through `assay mcp wrap` to real servers
(issue 4): the low-level `ClientSession` over `stdio_client` (the 2025 `initialize` handshake)
and the high-level `mcp.Client` in `mode="auto"` (probes `server/discover` in the same process,
so it negotiates 2026-07-28 with a modern server).

`stdio_client` hands the child only HOME/PATH/SHELL/TERM/USER/LOGNAME unless given `env=`, so
every run passes the test environment explicitly.
"""

from __future__ import annotations

import sys

import mcp.types as types
import trio
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import (
    DEMO_CALLS,
    DEMO_POLICY,
    DEMO_SERVER,
    E2E,
    EVERYTHING_SERVER,
    MODERN,
    RUN_TIMEOUT,
    TS_MODERN_SERVER,
    Call,
    WrapRun,
    assert_all_ended,
    assert_denied,
    assert_logs,
)


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _params(run: WrapRun, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)


def _assert_results(results: list, calls: list[Call]) -> None:
    for call, result in zip(calls, results, strict=True):
        if call.code is None:
            assert result.is_error is False, (call, result)
        else:
            assert_denied(call.name, result.is_error, result.structured_content, _text(result), call.code)


async def _assert_one_run_ended(run: WrapRun) -> None:
    """One wrap and one server were started, and neither outlived the client (docs/wrap.md,
    "Lifecycle and exit status")."""
    wraps, servers = run.pids()
    assert len(wraps) == 1 and len(servers) == 1, (wraps, servers)
    await assert_all_ended(wraps + servers)


async def _session_calls(run: WrapRun, env: dict[str, str], calls: list[Call]) -> tuple[str, list[str], list]:
    """ClientSession over stdio_client: initialize, list tools, make `calls`."""
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(_params(run, env), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                tools = await session.list_tools()
                results = [await session.call_tool(c.name, c.arguments) for c in calls]
    return init.protocol_version, [t.name for t in tools.tools], results


async def test_client_session_stdio_enforces_policy(tmp_path, base_env):
    """docs/wrap.md, "Enforcement" and "Deny replies"; docs/wrap-records.md: ClientSession over
    stdio_client against the SDK demo server: allowed calls reach the server, denied calls are
    isError results carrying the policy's error_code, and each call has one decision event and one
    audit record."""
    run = WrapRun(tmp_path, DEMO_POLICY, [sys.executable, str(DEMO_SERVER)])
    version, tools, results = await _session_calls(run, base_env, DEMO_CALLS)

    assert version != MODERN  # the initialize handshake is the 2025 era
    assert set(tools) == {"read_file", "list_dir", "write_file", "exec"}
    _assert_results(results, DEMO_CALLS)
    assert "Hello from the demo server." in _text(results[0])
    assert_logs(run, DEMO_CALLS)
    await _assert_one_run_ended(run)
    stderr = run.stderr_text()
    assert '[assay] DENY "exec" (reason: "Tool is explicitly denylisted by name")' in stderr, stderr
    assert '[assay] ALLOW "read_file"' in stderr


async def test_client_session_stdio_dry_run_forwards_denied_calls(tmp_path, base_env):
    """docs/wrap-records.md, "Which calls produce records" (dry run): under --dry-run the calls the
    policy denies reach the server (its own answers come back), the decision log says
    `decision: allow` while keeping the deny in reason_code/typed_decision, and the audit log says
    `would_deny`."""
    run = WrapRun(tmp_path, DEMO_POLICY, [sys.executable, str(DEMO_SERVER)], dry_run=True)
    _version, _tools, results = await _session_calls(run, base_env, DEMO_CALLS)

    by_name = dict(zip([c.name for c in DEMO_CALLS[2:]], results[2:], strict=True))
    # Forwarded: the server answered, nothing says "blocked by policy".
    assert all("Content blocked by policy" not in _text(r) for r in results)
    assert by_name["exec"].is_error is False and _text(by_name["exec"]) == "pretended to run: rm -rf /"
    assert by_name["write_file"].is_error is False and "wrote 1 bytes" in _text(by_name["write_file"])
    # read_file("/etc/passwd") reached the demo server, which raised (no such file); the SDK masks it.
    assert by_name["read_file"].is_error is True
    assert _text(by_name["read_file"]) == "Error executing tool read_file"
    assert_logs(run, DEMO_CALLS)
    await _assert_one_run_ended(run)
    stderr = run.stderr_text()
    assert "[assay] DRY RUN MODE: No actions will be blocked." in stderr, stderr
    assert '[assay] WOULD_DENY "exec" (reason: "Tool is explicitly denylisted by name")' in stderr, stderr


async def _client_auto_calls(run: WrapRun, env: dict[str, str], calls: list[Call]) -> tuple[str, list[str], list]:
    with trio.fail_after(RUN_TIMEOUT):
        async with Client(_params(run, env), mode="auto") as client:
            tools = await client.list_tools()
            results = [await client.call_tool(c.name, c.arguments) for c in calls]
            version = client.protocol_version
    return version, [t.name for t in tools.tools], results


async def test_high_level_client_auto_mode_modern_era(tmp_path, base_env):
    """docs/wrap.md, "Deny replies" (2026-07-28 era): `mcp.Client(..., mode="auto")` negotiates
    2026-07-28 with the SDK's MCPServer through wrap; denied calls come back as valid modern isError
    results with the error_code."""
    run = WrapRun(tmp_path, DEMO_POLICY, [sys.executable, str(DEMO_SERVER)])
    version, tools, results = await _client_auto_calls(run, base_env, DEMO_CALLS)

    assert version == MODERN
    assert set(tools) == {"read_file", "list_dir", "write_file", "exec"}
    _assert_results(results, DEMO_CALLS)
    assert results[0].structured_content == {"result": "# Demo workspace\nHello from the demo server.\n"}
    assert_logs(run, DEMO_CALLS)
    await _assert_one_run_ended(run)


async def test_high_level_client_auto_mode_against_ts_server(node, tmp_path, base_env):
    """Modern-era deny replies (docs/wrap.md, "Deny replies") across SDKs: the Python client in auto
    mode negotiates 2026-07-28 with a TypeScript `serveStdio` server through wrap; allowed and
    denied calls as the policy says."""
    run = WrapRun(tmp_path, DEMO_POLICY, ["node", str(TS_MODERN_SERVER)])
    calls = [c for c in DEMO_CALLS if c.name != "write_file"]
    version, tools, results = await _client_auto_calls(run, base_env, calls)

    assert version == MODERN
    assert set(tools) == {"read_file", "list_dir", "exec"}
    _assert_results(results, calls)
    assert _text(results[0]) == "# Demo workspace\n"
    assert_logs(run, calls)
    await _assert_one_run_ended(run)


async def test_high_level_client_auto_mode_falls_back_to_legacy(node, tmp_path, base_env):
    """The auto-mode probe in place: `mcp.Client(..., mode="auto")` sends `server/discover`
    through wrap to @modelcontextprotocol/server-everything (a 2025-era server, which answers
    -32601), falls back to `initialize` on the same wrap run, and the policy still holds."""
    run = WrapRun(tmp_path, E2E / "everything_policy.yaml", ["node", str(EVERYTHING_SERVER), "stdio"])
    calls = [
        Call("echo", {"message": "hello from python"}),
        Call("get-env", {}, "E_TOOL_DENIED"),
        Call("get-structured-content", {"location": "New York"}, "E_TOOL_NOT_ALLOWED"),
    ]
    version, tools, results = await _client_auto_calls(run, base_env, calls)

    assert version != MODERN
    assert {"echo", "get-env", "get-sum"} <= set(tools)
    _assert_results(results, calls)
    assert _text(results[0]) == "Echo: hello from python"
    assert_logs(run, calls)
    await _assert_one_run_ended(run)


async def test_server_initiated_sampling_round_trip(node, tmp_path, base_env):
    """docs/wrap.md, "Client frames" and "Enforcement": a server-initiated `sampling/createMessage`
    (server-everything's trigger-sampling-request tool) reaches the client through wrap, the
    client's response (a frame without `method`) is relayed back unevaluated, and the tool's result
    carries the client's sample. Only the tools/call itself is in the logs."""
    run = WrapRun(tmp_path, E2E / "everything_policy.yaml", ["node", str(EVERYTHING_SERVER), "stdio"])
    asked: list[str] = []

    async def sampling(_context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled-by-the-e2e-client"),
            model="e2e-model",
            stop_reason="endTurn",
        )

    call = Call("trigger-sampling-request", {"prompt": "through wrap", "maxTokens": 5})
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(_params(run, base_env), errlog=errlog) as (read, write):
            async with ClientSession(read, write, sampling_callback=sampling) as session:
                await session.initialize()
                await session.list_tools()
                result = await session.call_tool(call.name, call.arguments)

    assert asked == ["Resource trigger-sampling-request context: through wrap"]
    assert result.is_error is False, result
    assert "sampled-by-the-e2e-client" in _text(result) and "e2e-model" in _text(result)
    assert_logs(run, [call])
    await _assert_one_run_ended(run)
