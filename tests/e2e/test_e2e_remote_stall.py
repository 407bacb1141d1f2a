"""End to end: no stall per call through `assay mcp wrap --url` (docs/remote.md, "Connections").

tests/e2e/remote_server.py (the SDK's MCPServer on uvicorn, stateful, event-stream answers) is
served from a socket made without `IPPROTO_TCP`, so asyncio leaves Nagle's algorithm on for its
connections: it writes the head of each answer, then holds the body until the head is
acknowledged. On a connection the client keeps alive between requests, the client's kernel
delays that acknowledgement (>= 40 ms on Linux) and every call stalls; the SDK's own client
never sees it, because it opens a new connection per call.

The first test shows the precondition on this machine (a plain keep-alive HTTP client stalls);
the second shows that wrap, which keeps its connection, does not: its calls to that server take
no longer than its calls to the same server with TCP_NODELAY (`--nodelay`), made in turn with
them, so that a loaded machine slows both alike.
"""

from __future__ import annotations

import socket
import statistics
import time

import httpx2
import pytest
import trio

from _remote_support import INITIALIZE, INITIALIZED, RawClient, call, raw_wrap, remote_run, remote_server

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="the stall and its remedy are Linux's")

WARMUP = 5
CALLS = 20
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def _plain_keepalive_p50(url: str) -> float:
    """Median ms of a `tools/call` by an HTTP client that reads each answer whole and keeps its
    one connection (httpx2 under trio: TCP_NODELAY on its own side)."""
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx2.AsyncClient(limits=limits, timeout=30) as client:
        first = await client.post(url, json=INITIALIZE, headers=HEADERS)
        headers = {**HEADERS, "Mcp-Session-Id": first.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        await client.post(url, json=INITIALIZED, headers=headers)
        took = []
        for i in range(1, WARMUP + CALLS + 1):
            start = time.perf_counter()
            answer = await client.post(url, json=call(i, "echo", {"message": "hi"}), headers=headers)
            took.append(time.perf_counter() - start)
            assert b"echo: hi" in answer.content, answer.content
    return 1e3 * statistics.median(took[WARMUP:])


async def test_a_kept_alive_plain_client_stalls_on_this_server(tmp_path, base_env):
    """The precondition of the next test: the server's answers do wait for the client's delayed
    acknowledgement on a kept-alive connection (if this fails, the server or the kernel changed
    and the next test proves nothing)."""
    async with remote_server(tmp_path, base_env) as server:
        p50 = await _plain_keepalive_p50(server.url)
    assert p50 >= 30.0, f"a kept-alive plain client took {p50:.1f} ms per call: the server does not stall it"


async def _timed_call(client: RawClient, i: int) -> float:
    start = trio.current_time()
    await client.send(call(i, "echo", {"message": "hi"}))
    (answer,) = await client.wait_answers([i])
    assert answer["result"]["content"] == [{"type": "text", "text": "echo: hi"}], answer
    return trio.current_time() - start


async def test_sequential_calls_through_wrap_do_not_stall(tmp_path, base_env):
    """docs/remote.md, "Connections": 20 sequential `tools/call`s through wrap against the server
    with Nagle on take no longer than against the same server with TCP_NODELAY (the median of
    the differences of calls made in turn is under 15 ms); with the stall each took 40 ms
    more."""
    (tmp_path / "nagle").mkdir()
    (tmp_path / "nodelay").mkdir()
    async with (
        remote_server(tmp_path / "nagle", base_env) as nagle,
        remote_server(tmp_path / "nodelay", base_env, nodelay=True) as nodelay,
    ):
        run_nagle = remote_run(tmp_path / "nagle", nagle.url)
        run_nodelay = remote_run(tmp_path / "nodelay", nodelay.url)
        async with raw_wrap(run_nagle, base_env) as slow, raw_wrap(run_nodelay, base_env) as fast:
            for client in (slow, fast):
                await client.send(INITIALIZE)
                await client.wait_answers([0])
                await client.send(INITIALIZED)
            pairs = []
            for i in range(1, WARMUP + CALLS + 1):
                pairs.append((await _timed_call(slow, i), await _timed_call(fast, i)))
            for client in (slow, fast):
                await client.close_stdin()
    pairs = pairs[WARMUP:]
    added = 1e3 * statistics.median(a - b for a, b in pairs)
    shown = [(round(1e3 * a), round(1e3 * b)) for a, b in pairs]
    assert added < 15.0, f"calls to the server with Nagle on took {added:.1f} ms more (ms, nagle/nodelay): {shown}"
