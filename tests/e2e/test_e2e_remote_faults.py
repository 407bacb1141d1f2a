"""End to end: `assay mcp wrap --url` when the HTTP side goes wrong (docs/remote.md, "Start"
and "When the server fails"): a server down at start, killed mid-call, answering 500, stalling
an event stream, forgetting the session; header values from the environment that reach the
server and nowhere else (docs/remote.md, "Options"); plain http to a host that is not loopback
refused.

wrap runs as a real process with a raw stdio peer (tests/e2e/_remote_support.py, RawClient) so
the tests see wrap's exact frames, exit status and stderr; the servers are real processes on
127.0.0.1 (tests/e2e/remote_server.py). Every wait is on an event.
"""

from __future__ import annotations

import json

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from _e2e_support import RUN_TIMEOUT, assert_all_ended
from _remote_support import (
    INITIALIZE,
    INITIALIZED,
    RemoteRun,
    all_text,
    call,
    free_closed_port,
    raw_wrap,
    remote_run,
    remote_server,
    wait_exit,
    wrap_stderr,
)

# Long enough for a slow machine, short enough that a hang fails the test well inside the budget.
END_TIMEOUT = 30.0


def _stop_record(run: RemoteRun) -> dict:
    return json.loads((run.tmp / "stop.json").read_text())


def _with_stop(run: RemoteRun) -> RemoteRun:
    run.extra += ["--session-stop-out", str(run.tmp / "stop.json")]
    return run


def _fatal_lines(run: RemoteRun) -> list[str]:
    return [ln for ln in wrap_stderr(run) if ln.startswith("fatal:")]


def _assert_upstream_error(frame: dict, status: int | None = None) -> None:
    """docs/remote.md, "When the server fails": a request that failed upstream gets wrap's
    JSON-RPC error, code -32000, a message starting "assay: upstream error:", and for an HTTP
    status, `data.status`."""
    assert "error" in frame, frame
    assert frame["error"]["code"] == -32000, frame
    assert frame["error"]["message"].startswith("assay: upstream error:"), frame
    if status is not None:
        assert frame["error"]["data"]["status"] == status, frame


def _assert_ended_upstream(run: RemoteRun, code: int, pending: int) -> None:
    """docs/remote.md, "When the server fails" and "Exit status": the run ended on the lost
    server: one line saying how many requests were answered, exit 1, `upstream_error`."""
    assert code == 1, run.stderr_text()
    lines = [ln for ln in wrap_stderr(run) if ln.startswith("[assay] upstream error:")]
    assert len(lines) == 1, run.stderr_text()
    assert lines[0].endswith(f"; answering {pending} pending request(s) with an error"), lines
    stop = _stop_record(run)
    assert stop["stop_cause"] == "upstream_error", stop
    assert stop["upstream_error"], stop


async def _initialized(client) -> None:
    await client.send(INITIALIZE)
    (answer,) = await client.wait_answers([0])
    assert "result" in answer, answer
    await client.send(INITIALIZED)


# -- the server is down at start --------------------------------------------------------------


async def test_server_down_at_start_is_one_fatal_line_before_the_client(tmp_path, base_env):
    """docs/remote.md, "Start": wrap probes the server at start; nothing listens, so it
    prints one `fatal:` line and exits 2 on its own, without waiting for its client (whose stdin
    stays open and silent)."""
    sock, port = free_closed_port()
    with sock:
        run = remote_run(tmp_path, f"http://127.0.0.1:{port}/mcp")
        async with raw_wrap(run, base_env) as client:
            code = await wait_exit(client.process, END_TIMEOUT)
            with trio.fail_after(END_TIMEOUT):
                await client.eof.wait()
    assert code == 2, run.stderr_text()
    assert len(_fatal_lines(run)) == 1, run.stderr_text()
    assert client.frames == []


# -- the server is killed mid-call ------------------------------------------------------------


async def test_server_killed_with_20_calls_pending(tmp_path, base_env):
    """docs/remote.md, "When the server fails": 20 `slow` calls are running on the server when it is
    SIGKILLed; wrap answers every one with a JSON-RPC error, then ends (exit 1, stop cause
    `upstream_error`), no hang."""
    async with remote_server(tmp_path, base_env) as server:
        run = _with_stop(remote_run(tmp_path, server.url))
        async with raw_wrap(run, base_env) as client:
            await _initialized(client)
            ids = list(range(1, 21))
            await client.send(*(call(i, "slow", {"steps": 1, "hold": True}) for i in ids))
            await server.wait_for("RAN slow", 20)
            server.kill()
            answers = await client.wait_answers(ids)
            code = await wait_exit(client.process, END_TIMEOUT)
    for frame in answers:
        _assert_upstream_error(frame)
    _assert_ended_upstream(run, code, 20)
    await assert_all_ended(run.pids()[0])


async def test_python_client_gets_20_errors_when_the_server_is_killed(tmp_path, base_env):
    """The same as the Python SDK client sees it: 20 concurrent `call_tool`s each raise the
    JSON-RPC error wrap answered, and the session ends (wrap closes its stdout), no hang."""
    codes: list[int] = []
    async with remote_server(tmp_path, base_env) as server:
        run = remote_run(tmp_path, server.url)
        params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=base_env)
        with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()

                    async def one() -> None:
                        try:
                            await session.call_tool("slow", {"steps": 1, "hold": True})
                        except MCPError as exc:
                            codes.append(exc.code)
                            assert exc.message.startswith("assay: upstream error:"), exc.message

                    async with trio.open_nursery() as nursery:
                        for _ in range(20):
                            nursery.start_soon(one)
                        await server.wait_for("RAN slow", 20)
                        server.kill()
    assert codes == [-32000] * 20
    await assert_all_ended(run.pids()[0])


# -- a 500 answer ---------------------------------------------------------------------------


async def test_a_500_fails_that_request_and_the_session_goes_on(tmp_path, base_env):
    """docs/remote.md, "When the server fails": the server answers one call `500`; that request gets
    wrap's JSON-RPC error, the next call is answered by the server as usual, and the run ends
    normally at the client's EOF."""
    async with remote_server(tmp_path, base_env, faults=("500",)) as server:
        run = _with_stop(remote_run(tmp_path, server.url))
        async with raw_wrap(run, base_env) as client:
            await _initialized(client)
            await client.send(call(1, "boom"))
            (boom,) = await client.wait_answers([1])
            await client.send(call(2, "echo", {"message": "still here"}))
            (echo,) = await client.wait_answers([2])
            await client.close_stdin()
            code = await wait_exit(client.process, END_TIMEOUT)
        assert server.ran() == ["echo"]
    _assert_upstream_error(boom, 500)
    assert echo["result"]["content"] == [{"type": "text", "text": "echo: still here"}], echo
    assert code == 0, run.stderr_text()
    assert _stop_record(run)["stop_cause"] == "client_eof"


# -- a stalled SSE stream -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["cancel", "eof"])
async def test_a_stalled_sse_stream_does_not_hold_wrap(tmp_path, base_env, how):
    """docs/remote.md, "When the server fails": the server starts the call's event stream and never sends
    the answer; the client cancels the call (`notifications/cancelled`) then closes its stdin, or
    just closes it: wrap ends without hanging."""
    async with remote_server(tmp_path, base_env, faults=("stall",)) as server:
        run = _with_stop(remote_run(tmp_path, server.url))
        async with raw_wrap(run, base_env) as client:
            await _initialized(client)
            await client.send(call(1, "stall"))
            await server.wait_for("FAULT stall")
            if how == "cancel":
                await client.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 1, "reason": "the e2e client gave up"},
                    }
                )
            await client.close_stdin()
            code = await wait_exit(client.process, END_TIMEOUT)
    assert code == 0, run.stderr_text()
    assert _stop_record(run)["stop_cause"] == "client_eof"
    stall = client.answer(1)
    if how == "eof":  # still open when the grace ended: wrap's error (docs/remote.md, "When the server fails")
        assert stall is not None, client.frames
        _assert_upstream_error(stall)
    else:  # cancelled: nobody waits for an answer any more
        assert stall is None or "error" in stall, stall


# -- the server forgets the session --------------------------------------------------------


async def test_an_expired_session_answers_the_pending_requests_and_ends(tmp_path, base_env):
    """docs/remote.md, "When the server fails": a `slow` call is running when the server forgets the
    session (404 to the next request); both requests get wrap's JSON-RPC error, the run ends
    (exit 1), and the stop record says `upstream_error`."""
    async with remote_server(tmp_path, base_env, faults=("forget",)) as server:
        run = _with_stop(remote_run(tmp_path, server.url))
        async with raw_wrap(run, base_env) as client:
            await _initialized(client)
            await client.send(call(1, "slow", {"steps": 1, "hold": True}))
            await server.wait_for("RAN slow")
            await client.send(call(2, "forget"))
            answers = await client.wait_answers([1, 2])
            code = await wait_exit(client.process, END_TIMEOUT)
    for frame in answers:  # the one pending on the server, and the one the 404 answered
        _assert_upstream_error(frame)
    assert "session expired" in answers[1]["error"]["message"], answers
    _assert_ended_upstream(run, code, 2)


# -- header values -------------------------------------------------------------------------

TOKEN = "e2e-secret-token-4f9c2a7d1b"
# every one-run output (docs/wrap.md, "One-run outputs and session reports")
ONE_RUN_OUTPUTS = [
    "--request-receipts-out",
    "--session-context-out",
    "--session-stop-out",
    "--coverage-out",
    "--state-window-out",
    "--observed-manifest-out",
]


async def test_header_values_reach_the_server_and_no_log(tmp_path, base_env):
    """docs/remote.md, "Options": `--header 'Authorization: Bearer ${TOKEN}'` takes TOKEN
    from wrap's environment; the server (which answers 401 without it) serves the session, and
    the value is in none of wrap's stderr, decision log, audit log or one-run outputs."""
    env = {**base_env, "TOKEN": TOKEN}
    server_env = {**base_env, "E2E_EXPECT_AUTH": f"Bearer {TOKEN}"}
    async with remote_server(tmp_path, server_env) as server:
        outputs = {flag: tmp_path / f"{flag.strip('-')}.json" for flag in ONE_RUN_OUTPUTS}
        extra = ["--header", "Authorization: Bearer ${TOKEN}"]
        for flag, path in outputs.items():
            extra += [flag, str(path)]
        run = remote_run(tmp_path, server.url, extra=extra)
        params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
        with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {t.name for t in (await session.list_tools()).tools}
                    echo = await session.call_tool("echo", {"message": "authorized"})
        assert server.ran() == ["echo"]
        assert not [ln for ln in server.lines if ln.startswith("AUTH")], server.lines
    assert "echo" in tools and echo.is_error is False
    assert all(path.stat().st_size > 0 for path in outputs.values()), outputs
    assert TOKEN not in all_text(run, *outputs.values())
    await assert_all_ended(run.pids()[0])


async def test_a_wrong_header_value_is_a_fatal_401_that_names_the_header(tmp_path, base_env):
    """docs/remote.md, "Start"; docs/auth.md, "Messages": the server answers 401 to the probe (a
    wrong token): one `fatal:` line naming the header refused and the variable its value comes
    from, exit 2, and the value sent appears nowhere. The server advertises no OAuth (no
    protected-resource metadata), so no `auth login` is suggested."""
    env = {**base_env, "TOKEN": TOKEN}
    async with remote_server(tmp_path, {**base_env, "E2E_EXPECT_AUTH": "Bearer another"}) as server:
        run = remote_run(tmp_path, server.url, extra=["--header", "Authorization: Bearer ${TOKEN}"])
        async with raw_wrap(run, env) as client:
            code = await wait_exit(client.process, END_TIMEOUT)
    assert code == 2, run.stderr_text()
    (fatal,) = _fatal_lines(run)
    assert fatal == (
        f"fatal: {server.url} refused the Authorization header (HTTP 401); its value comes from TOKEN "
        "in wrap's environment (this entry's env)"
    ), fatal
    assert TOKEN not in all_text(run)


async def test_a_missing_header_variable_is_one_fatal_line(tmp_path, base_env):
    """docs/remote.md, "Options": `${VAR}` in a header value names a variable wrap's
    environment lacks: one `fatal:` line, exit 2, before anything is sent."""
    async with remote_server(tmp_path, base_env) as server:
        run = remote_run(tmp_path, server.url, extra=["--header", "Authorization: Bearer ${E2E_NO_SUCH_VAR}"])
        async with raw_wrap(run, base_env) as client:
            code = await wait_exit(client.process, END_TIMEOUT)
        assert not [ln for ln in server.lines if ln.startswith(("RAN", "AUTH"))]
    assert code == 2, run.stderr_text()
    assert len(_fatal_lines(run)) == 1, run.stderr_text()


# -- plain http to a host that is not loopback ------------------------------------------------


async def test_plain_http_to_a_non_loopback_host_is_refused(tmp_path, base_env):
    """docs/remote.md, "Options": `http://` to a host that is not loopback is refused
    (exit 2) unless `--allow-insecure-http`; the refusal comes before any connection (192.0.2.1 is
    a documentation address, TEST-NET-1: nothing answers there, and nothing is tried)."""
    run = remote_run(tmp_path, "http://192.0.2.1/mcp")
    async with raw_wrap(run, base_env) as client:
        code = await wait_exit(client.process, END_TIMEOUT)
    assert code == 2, run.stderr_text()
    assert "--allow-insecure-http" in run.stderr_text(), run.stderr_text()
    assert client.frames == []


async def test_url_and_a_server_command_exclude_each_other(tmp_path, base_env):
    """docs/remote.md, "Options": `--url` with `-- <command>` is a usage error (exit 2)."""
    run = remote_run(tmp_path, "http://127.0.0.1:9/mcp")
    argv = [*run.argv, "--", "true"]
    with trio.fail_after(END_TIMEOUT):
        proc = await trio.run_process(
            argv, stdin=b"", capture_stdout=True, capture_stderr=True, check=False, env=base_env
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == b""
