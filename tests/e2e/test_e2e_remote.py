"""End to end: real MCP clients (the `mcp` Python SDK, the TypeScript SDK v1 and v2) driving
`assay mcp wrap --url` as a real process over stdio, and wrap talking HTTP on 127.0.0.1 to real
servers: the SDK's MCPServer over Streamable HTTP (with sessions, and stateless in the
2026-07-28 era), @modelcontextprotocol/server-everything in its streamableHttp mode, and the
legacy HTTP+SSE transport (docs/remote.md). The policy holds as for a stdio
server: allowed calls reach the server, denied ones never do (its call log), server-initiated
requests and progress notifications are relayed.

`stdio_client` hands the child only a few variables unless given `env=`, so every run passes the
test environment explicitly.
"""

from __future__ import annotations

import mcp.types as types
import pytest
import trio
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import MODERN, RUN_TIMEOUT, Call, WrapRun, assert_all_ended, assert_denied, assert_logs
from _remote_support import EVERYTHING_POLICY, everything_server, remote_run, remote_server, run_ts

TOOLS = {"echo", "add", "slow", "release", "ask", "delete_all", "ask_client", "big", "drop"}
CALLS = [
    Call("echo", {"message": "hi"}),
    Call("delete_all", {}, "E_TOOL_DENIED"),
    Call("slow", {"steps": 3}),
    Call("ask", {}),
]


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _params(run: WrapRun, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)


async def _ended(run: WrapRun) -> None:
    """One wrap was started, and it did not outlive its client (docs/wrap.md, "Lifecycle and
    exit status")."""
    wraps, _ = run.pids()
    assert len(wraps) == 1, wraps
    await assert_all_ended(wraps)


class _Elicit:
    """An elicitation callback answering every question with a name, remembering the questions."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    async def __call__(self, _context, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": self.name})


async def _python_session(run: WrapRun, env: dict[str, str], calls: list[Call]) -> tuple[set[str], list, list, list]:
    """ClientSession over stdio_client (the 2025 `initialize` handshake) with an elicitation
    callback: list the tools, make `calls` (each with a progress callback). Returns (tools,
    results, progress seen per call, questions asked)."""
    elicit = _Elicit("ann")
    progress: list[list[tuple]] = []
    results = []
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(_params(run, env), errlog=errlog) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicit) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                for c in calls:
                    seen: list[tuple] = []

                    async def on_progress(p: float, total: float | None, message: str | None, seen=seen) -> None:
                        seen.append((p, total, message))

                    results.append(await session.call_tool(c.name, c.arguments, progress_callback=on_progress))
                    progress.append(seen)
    return tools, results, progress, elicit.asked


def _assert_results(results: list, calls: list[Call]) -> None:
    for c, result in zip(calls, results, strict=True):
        if c.code is None:
            assert result.is_error is False, (c, result)
        else:
            assert_denied(c.name, result.is_error, result.structured_content, _text(result), c.code)


def _assert_ts_progress(line: dict, want: list[int], errors: list[str]) -> None:
    """wrap relayed the call's progress notifications, in order, before its answer (the wire as
    ts_remote_client.mjs saw it). The TS SDK v1 hands a notification to its handler a microtask
    after reading it but handles a response at once, so those read in the same chunk as the
    answer reach no handler: the client reports each as an unknown token, and nothing else."""
    assert line["wire"] == want, line
    handled = [p["progress"] for p in line["progress"]]
    assert handled == want[: len(handled)], line
    assert len(errors) == len(want) - len(handled), errors
    assert all("progress notification for an unknown token" in e for e in errors), errors


# -- 1. MCPServer over Streamable HTTP -------------------------------------------------------


async def test_python_client_through_wrap_url_to_streamable_http(tmp_path, base_env):
    """docs/remote.md: the Python SDK client drives `wrap --url` to the SDK's
    MCPServer over Streamable HTTP: tools listed, the allowed call answered, the denied call
    answered with the deny and never run by the server, progress relayed, the server's
    elicitation/create relayed to the client and its answer back."""
    async with remote_server(tmp_path, base_env) as server:
        run = remote_run(tmp_path, server.url)
        tools, results, progress, asked = await _python_session(run, base_env, CALLS)
        assert server.ran() == ["echo", "slow", "ask"]  # delete_all never reached it
    assert tools == TOOLS
    _assert_results(results, CALLS)
    assert _text(results[0]) == "echo: hi"
    assert progress[2] == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert asked == ["What is your name?"]
    assert _text(results[3]) == "hello, ann"
    assert_logs(run, CALLS)
    await _ended(run)
    assert '[assay] DENY "delete_all"' in run.stderr_text()


async def test_ts_v1_client_through_wrap_url_to_streamable_http(node, tmp_path, base_env):
    """The same through the TypeScript SDK v1 client (its stdio transport to wrap)."""
    steps = [{"op": "list"}] + [{"op": "call", "name": c.name, "arguments": c.arguments} for c in CALLS]
    async with remote_server(tmp_path, base_env) as server:
        run = remote_run(tmp_path, server.url)
        lines = await run_ts(node, run, base_env, steps, answer={"action": "accept", "content": {"name": "ts"}})
        assert server.ran() == ["echo", "slow", "ask"]
    listed, echo, denied, slow, ask = lines[1:-1]
    assert set(listed["tools"]) == TOOLS
    assert echo["is_error"] is False and echo["texts"] == ["echo: hi"], echo
    assert_denied(
        "delete_all", denied["is_error"], denied["structuredContent"], "".join(denied["texts"]), "E_TOOL_DENIED"
    )
    _assert_ts_progress(slow, [1, 2, 3], lines[-1]["errors"])
    assert ask["asked"] == ["What is your name?"] and ask["texts"] == ["hello, ts"], ask
    assert_logs(run, CALLS)
    await _ended(run)


# -- 2. server-everything in its streamableHttp mode -----------------------------------------

EVERYTHING_CALLS = [
    Call("echo", {"message": "hello over http"}),
    Call("get-env", {}, "E_TOOL_DENIED"),
    Call("get-structured-content", {"location": "New York"}, "E_TOOL_NOT_ALLOWED"),
]


async def test_python_client_to_server_everything_over_http(node, tmp_path, base_env):
    """docs/remote.md: @modelcontextprotocol/server-everything over Streamable
    HTTP through wrap --url: its tools listed, echo answered, get-env denied by name, a tool
    outside the allowlist denied."""
    async with everything_server(node, tmp_path, base_env) as server:
        run = remote_run(tmp_path, server.url, EVERYTHING_POLICY)
        tools, results, _progress, _asked = await _python_session(run, base_env, EVERYTHING_CALLS)
    assert {"echo", "get-env", "get-sum"} <= tools
    _assert_results(results, EVERYTHING_CALLS)
    assert _text(results[0]) == "Echo: hello over http"
    assert_logs(run, EVERYTHING_CALLS)
    await _ended(run)


async def test_ts_v1_client_to_server_everything_over_http(node, tmp_path, base_env):
    """The same with the TypeScript SDK v1 client."""
    steps = [{"op": "list"}] + [{"op": "call", "name": c.name, "arguments": c.arguments} for c in EVERYTHING_CALLS]
    async with everything_server(node, tmp_path, base_env) as server:
        run = remote_run(tmp_path, server.url, EVERYTHING_POLICY)
        lines = await run_ts(node, run, base_env, steps)
    listed, echo, env, other = lines[1:-1]
    assert {"echo", "get-env", "get-sum"} <= set(listed["tools"])
    assert echo["is_error"] is False and echo["texts"] == ["Echo: hello over http"], echo
    for line, c in ((env, EVERYTHING_CALLS[1]), (other, EVERYTHING_CALLS[2])):
        assert_denied(c.name, line["is_error"], line["structuredContent"], "".join(line["texts"]), c.code)
    assert_logs(run, EVERYTHING_CALLS)
    await _ended(run)


# -- 3. the 2026-07-28 era: a stateless modern server --------------------------------------

MODERN_CALLS = [Call("echo", {"message": "modern"}), Call("delete_all", {}, "E_TOOL_DENIED"), Call("ask", {})]
# The server's input_required answer and the client's retry are two tools/call frames, each judged
# and recorded (docs/wrap.md, "Approvals": a retry is a call like any other).
MODERN_RECORDS = [*MODERN_CALLS, Call("ask", {})]


async def test_python_modern_client_to_stateless_server(tmp_path, base_env):
    """docs/remote.md (2026-07-28 era): `mcp.Client(mode="auto")` over stdio to
    wrap --url, wrap to the SDK's MCPServer in stateless mode: the era negotiated is 2026-07-28,
    the call answered, the denied call never reaches the server, and the server's `ask` comes
    back as an input_required result the client answers (its elicitation callback) and retries."""
    elicit = _Elicit("modern ann")
    async with remote_server(tmp_path, base_env, mode="stateless") as server:
        run = remote_run(tmp_path, server.url)
        with trio.fail_after(RUN_TIMEOUT):
            async with Client(_params(run, base_env), mode="auto", elicitation_callback=elicit) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                results = [await client.call_tool(c.name, c.arguments) for c in MODERN_CALLS]
                version = client.protocol_version
        assert server.ran() == ["echo", "ask"]
    assert version == MODERN
    assert tools == TOOLS
    _assert_results(results, MODERN_CALLS)
    assert _text(results[0]) == "echo: modern"
    assert elicit.asked == ["What is your name?"]
    assert _text(results[2]) == "hello, modern ann"
    assert_logs(run, MODERN_RECORDS)
    await _ended(run)


async def test_ts_v2_modern_client_to_stateless_server(node, tmp_path, base_env):
    """The same with the TypeScript SDK v2 client in `versionNegotiation: {mode: 'auto'}`."""
    steps = [{"op": "list"}] + [{"op": "call", "name": c.name, "arguments": c.arguments} for c in MODERN_CALLS]
    async with remote_server(tmp_path, base_env, mode="stateless") as server:
        run = remote_run(tmp_path, server.url)
        lines = await run_ts(
            node, run, base_env, steps, sdk="v2", mode="auto", answer={"action": "accept", "content": {"name": "v2"}}
        )
        assert server.ran() == ["echo", "ask"]
    connected, listed, echo, denied, ask = lines[:-1]
    assert connected["protocolVersion"] == MODERN
    assert set(listed["tools"]) == TOOLS
    assert echo["is_error"] is False and echo["texts"] == ["echo: modern"], echo
    assert_denied(
        "delete_all", denied["is_error"], denied["structuredContent"], "".join(denied["texts"]), "E_TOOL_DENIED"
    )
    assert ask["asked"] == ["What is your name?"] and ask["texts"] == ["hello, v2"], ask
    assert_logs(run, MODERN_RECORDS)
    wraps, _ = run.pids()  # the auto-mode probe may be a run of its own
    await assert_all_ended(wraps)


# -- 4. the legacy HTTP+SSE transport --------------------------------------------------------

SSE_CALLS = [Call("echo", {"message": "over sse"}), Call("delete_all", {}, "E_TOOL_DENIED"), Call("slow", {"steps": 2})]


@pytest.mark.parametrize("transport", ["sse", None])
async def test_python_client_to_legacy_sse_server(tmp_path, base_env, transport):
    """docs/remote.md: the SDK's legacy HTTP+SSE server, with `--transport sse`,
    and with the default `auto` (the first POST to the SSE endpoint gets a 405, wrap falls back):
    tools listed, the call answered with its progress, the denied call never reaches the server."""
    async with remote_server(tmp_path, base_env, mode="sse") as server:
        run = remote_run(tmp_path, server.url, transport=transport)
        tools, results, progress, _asked = await _python_session(run, base_env, SSE_CALLS)
        assert server.ran() == ["echo", "slow"]
    assert tools == TOOLS
    _assert_results(results, SSE_CALLS)
    assert _text(results[0]) == "echo: over sse"
    assert [p[0] for p in progress[2]] == [1.0, 2.0]
    assert_logs(run, SSE_CALLS)
    await _ended(run)


async def test_ts_v1_client_to_legacy_sse_server_auto(node, tmp_path, base_env):
    """The TypeScript SDK v1 client through wrap's default transport to the legacy SSE server."""
    steps = [{"op": "list"}] + [{"op": "call", "name": c.name, "arguments": c.arguments} for c in SSE_CALLS]
    async with remote_server(tmp_path, base_env, mode="sse") as server:
        run = remote_run(tmp_path, server.url)
        lines = await run_ts(node, run, base_env, steps)
        assert server.ran() == ["echo", "slow"]
    listed, echo, denied, slow = lines[1:-1]
    assert set(listed["tools"]) == TOOLS
    assert echo["texts"] == ["echo: over sse"], echo
    assert_denied(
        "delete_all", denied["is_error"], denied["structuredContent"], "".join(denied["texts"]), "E_TOOL_DENIED"
    )
    assert slow["is_error"] is False, slow
    _assert_ts_progress(slow, [1, 2], lines[-1]["errors"])
    assert_logs(run, SSE_CALLS)
    await _ended(run)
