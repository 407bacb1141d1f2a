"""End to end: approvals that ask a person (docs/wrap.md, "Approvals"; docs/policy.md,
"Approvals"), with real SDK clients that answer wrap's `elicitation/create` and the SDK demo
server behind wrap, under the docs' `approvals` example policy.

The demo server keeps its files in memory, so whether a write reached it is read back with
`read_file` in the same session: an approved write is there, a declined one never happened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mcp.types as types
import pytest
import trio
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import DEMO_SERVER, DENY_TEXT, E2E, MODERN, RUN_TIMEOUT, WrapRun, assert_all_ended, assert_denied
from tests.docs_examples import policy_example

TS_ELICIT_CLIENT = E2E / "ts_elicit_client.mjs"
WRITE = {"path": "/workspace/new.txt", "content": "approved text"}
CALLS = [("write_file", WRITE), ("read_file", {"path": "/workspace/new.txt"})]


def approval_run(tmp: Path) -> WrapRun:
    policy = tmp / "approvals.yaml"
    policy.write_text(policy_example("approvals"))
    return WrapRun(tmp, policy, [sys.executable, str(DEMO_SERVER)])


def elicitation(answer: str | None) -> tuple[dict, list]:
    """The SDK client keyword for an elicitation callback that answers `answer` ({} for None: no
    callback, so no elicitation capability), and the list of what it was asked."""
    asked: list = []

    async def elicit(ctx, params):
        asked.append(params)
        return types.ElicitResult(action=answer, content={} if answer == "accept" else None)

    return ({} if answer is None else {"elicitation_callback": elicit}), asked


async def python_calls(run: WrapRun, env: dict[str, str], answer: str | None) -> tuple[list, list]:
    """ClientSession with an elicitation callback answering `answer` (None: no callback, so no
    elicitation capability). Returns (results, what the callback was asked)."""
    callback, asked = elicitation(answer)
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, **callback) as session:
                await session.initialize()
                results = [await session.call_tool(name, arguments) for name, arguments in CALLS]
    return results, asked


def assert_ts_asked(write: dict, read: dict, answer: str | None) -> None:
    """The TS client threw nothing, and its handler was asked once about the write (a form with
    no fields and wrap's message), or never when it has no elicitation capability."""
    assert "thrown" not in write and "thrown" not in read, (write, read)
    if answer is None:
        assert write["asked"] == []
    else:
        (asked,) = write["asked"]
        assert asked["mode"] == "form" and asked["requestedSchema"] == {"type": "object", "properties": {}}
        assert_message(asked["message"])


async def ts_calls(
    node: str, run: WrapRun, env: dict[str, str], answer: str | None, sdk: str = "v1", mode: str | None = None
) -> list[dict]:
    spec = {
        "sdk": sdk,
        "mode": mode,
        "command": run.argv[0],
        "args": run.argv[1:],
        "timeoutMs": int(RUN_TIMEOUT * 1000),
        "answer": answer,
        "calls": [{"name": name, "arguments": arguments} for name, arguments in CALLS],
    }
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_ELICIT_CLIENT)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(E2E),
            env=env,
        )
    run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, (
        f"ts_elicit_client ({sdk}) exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{run.stderr_text()}"
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected", "call", "call", "closed"], out
    assert lines[-1]["errors"] == [], lines[-1]
    if mode == "auto":
        assert lines[0]["protocolVersion"] == MODERN, lines[0]
    return lines[1:-1]


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def assert_message(message: str) -> None:
    """The person saw the tool and its arguments."""
    assert '"write_file"' in message, message
    assert json.dumps(WRITE, separators=(",", ":")) in message, message


def assert_decisions(run: WrapRun, approval_state: str, denied: bool) -> None:
    decisions = run.decisions()
    assert [d["tool"] for d in decisions] == ["write_file", "read_file"], decisions
    write, read = decisions
    assert write["approval_state"] == approval_state, write
    assert write["decision"] == ("deny" if denied else "allow"), write
    if denied:
        assert (
            write["reason_code"] == "P_APPROVAL_DENIED" and write["matched_rule"] == "tools.approval_required_classes"
        )
    assert "approval_state" not in read and read["decision"] == "allow", read
    assert [a["tool"] for a in run.audits()] == ["write_file", "read_file"]


def assert_client(run: WrapRun, declared_in: str, elicitation: str, name: str) -> None:
    """wrap recorded what the real client declared, once (docs/wrap-records.md, "The client")."""
    [client] = run.clients()
    assert (client["declared_in"], client["elicitation"]) == (declared_in, elicitation), client
    assert client["client"]["name"] == name, client
    assert client["server"] == run.label and "protocol_version" in client, client


async def assert_ended(run: WrapRun) -> None:
    wraps, servers = run.pids()
    assert len(wraps) == 1 and len(servers) == 1, (wraps, servers)
    await assert_all_ended(wraps + servers)


# -- the Python SDK ------------------------------------------------------------------------------


async def test_python_client_accepts_and_the_write_happens(tmp_path, base_env):
    run = approval_run(tmp_path)
    (write, read), asked = await python_calls(run, base_env, "accept")
    assert len(asked) == 1
    assert_message(asked[0].message)
    assert write.is_error is False and "wrote 13 bytes" in _text(write), write
    assert read.is_error is False and "approved text" in _text(read), read
    assert_decisions(run, "approved", denied=False)
    assert_client(run, "initialize", "form", "mcp")
    await assert_ended(run)


async def test_python_client_declines_and_the_write_never_happens(tmp_path, base_env):
    run = approval_run(tmp_path)
    (write, read), asked = await python_calls(run, base_env, "decline")
    assert len(asked) == 1
    assert_denied("write_file", write.is_error, write.structured_content, _text(write), "E_APPROVAL_DENIED")
    payload = json.loads(_text(write)[len(DENY_TEXT) :])
    assert payload["approval"] == "declined"
    assert read.is_error is True and DENY_TEXT not in _text(read)  # the server: no such file
    assert_decisions(run, "declined", denied=True)
    await assert_ended(run)


async def test_python_client_without_elicitation_gets_the_fallback_deny(tmp_path, base_env):
    run = approval_run(tmp_path)
    (write, read), asked = await python_calls(run, base_env, None)
    assert asked == []
    assert_denied("write_file", write.is_error, write.structured_content, _text(write), "E_APPROVAL_DENIED")
    payload = json.loads(_text(write)[len(DENY_TEXT) :])
    assert payload["approval"] == "unavailable" and "cannot ask a person" in payload["reason"]
    assert "approval_fallback: allow" in payload["reason"]  # the deny names the fix
    assert read.is_error is True
    assert_decisions(run, "unavailable", denied=True)
    assert "approval_fallback: allow" in run.decisions()[0]["reason"]  # and so does the log
    assert_client(run, "initialize", "none", "mcp")
    await assert_ended(run)


# -- the TypeScript SDK v1 -----------------------------------------------------------------------


@pytest.mark.parametrize("sdk", ["v1", "v2"])
@pytest.mark.parametrize("answer", ["accept", "decline", None])
async def test_ts_client_elicitation_handler(node, tmp_path, base_env, answer, sdk):
    """The TS SDK (v1, what most hosts ship, and v2) validates wrap's request with its own
    elicitation schema before the handler runs (form mode, as the capability `{elicitation: {}}`
    declares), and a deny is an isError result, never a thrown error."""
    run = approval_run(tmp_path)
    write, read = await ts_calls(node, run, base_env, answer, sdk)
    assert_ts_asked(write, read, answer)
    assert read["asked"] == []
    if answer == "accept":
        assert write["is_error"] is False and "wrote 13 bytes" in "".join(write["texts"]), write
        assert read["is_error"] is False and "approved text" in "".join(read["texts"]), read
        assert_decisions(run, "approved", denied=False)
    else:
        assert_denied(
            "write_file", write["is_error"], write["structuredContent"], "".join(write["texts"]), "E_APPROVAL_DENIED"
        )
        which = "declined" if answer == "decline" else "unavailable"
        assert json.loads("".join(write["texts"])[len(DENY_TEXT) :])["approval"] == which
        assert read["is_error"] is True  # never written
        assert_decisions(run, which, denied=True)
    assert_client(run, "initialize", "none" if answer is None else "form", f"assay-e2e-ts-{sdk}-elicit-client")
    await assert_ended(run)


async def test_python_client_that_never_answers_times_out_and_its_prompt_is_cancelled(tmp_path, base_env):
    """With no answer within approval_timeout the call is denied `timed_out`, and wrap's
    notifications/cancelled makes the SDK cancel the callback that was still waiting."""
    policy = tmp_path / "approvals.yaml"
    policy.write_text(policy_example("approvals").replace("approval_timeout: 2m", "approval_timeout: 1s"))
    run = WrapRun(tmp_path, policy, [sys.executable, str(DEMO_SERVER)])
    prompt_closed = trio.Event()

    async def elicit(ctx, params):
        try:
            await trio.sleep_forever()
        finally:
            prompt_closed.set()

    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=base_env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicit) as session:
                await session.initialize()
                result = await session.call_tool("write_file", WRITE)
                await prompt_closed.wait()  # wrap's cancellation reached the callback
                assert_denied(
                    "write_file", result.is_error, result.structured_content, _text(result), "E_APPROVAL_DENIED"
                )
                assert json.loads(_text(result)[len(DENY_TEXT) :])["approval"] == "timed_out"
                read_back = await session.call_tool("read_file", {"path": "/workspace/new.txt"})
                assert read_back.is_error is True
    assert_decisions(run, "timed_out", denied=True)
    await assert_ended(run)


# -- the 2026-07-28 era: input_required (multi round-trip) ---------------------------------------


async def python_auto_calls(run: WrapRun, env: dict[str, str], answer: str | None) -> tuple[str, list, list]:
    """`mcp.Client(mode="auto")` (negotiates 2026-07-28 with the demo server, so every request
    carries its capabilities in `_meta` and there is no initialize), with an elicitation callback
    answering `answer` (None: no callback, so no elicitation capability). Returns (the protocol
    version, results, what the callback was asked)."""
    callback, asked = elicitation(answer)
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT):
        async with Client(params, mode="auto", **callback) as client:
            results = [await client.call_tool(name, arguments) for name, arguments in CALLS]
            version = client.protocol_version
    return version, results, asked


@pytest.mark.parametrize("answer", ["accept", "decline", "cancel", None])
async def test_python_modern_client_answers_wraps_input_required(tmp_path, base_env, answer):
    """docs/wrap.md, "Approvals" (2026-07-28 era): wrap answers the call with an input_required
    result; the SDK runs its elicitation callback and retries the call with the answer; an
    accepted retry reaches the server, any other answer is denied, and a client that declared no
    elicitation gets the fallback."""
    run = approval_run(tmp_path)
    version, (write, read), asked = await python_auto_calls(run, base_env, answer)
    assert version == MODERN
    if answer is None:
        assert asked == []
    else:
        assert len(asked) == 1
        assert asked[0].mode == "form" and asked[0].requested_schema == {"type": "object", "properties": {}}
        assert_message(asked[0].message)
    which = {"accept": "approved", "decline": "declined", "cancel": "cancelled", None: "unavailable"}[answer]
    if answer == "accept":
        assert write.is_error is False and "wrote 13 bytes" in _text(write), write
        assert read.is_error is False and "approved text" in _text(read), read
    else:
        assert_denied("write_file", write.is_error, write.structured_content, _text(write), "E_APPROVAL_DENIED")
        assert json.loads(_text(write)[len(DENY_TEXT) :])["approval"] == which
        assert read.is_error is True and DENY_TEXT not in _text(read)  # never written
    assert_decisions(run, which, denied=answer != "accept")
    assert_client(run, "request", "none" if answer is None else "form", "mcp")  # once: the retry declares the same
    await assert_ended(run)


@pytest.mark.parametrize("answer", ["accept", "decline", None])
async def test_ts_v2_modern_client_answers_wraps_input_required(node, tmp_path, base_env, answer):
    """The TS SDK v2 in `versionNegotiation: {mode: 'auto'}` (2026-07-28 with the demo server)
    meets wrap's approval as an input_required result, runs its elicitation handler and retries."""
    run = approval_run(tmp_path)
    write, read = await ts_calls(node, run, base_env, answer, "v2", mode="auto")
    assert_ts_asked(write, read, answer)
    which = {"accept": "approved", "decline": "declined", None: "unavailable"}[answer]
    if answer == "accept":
        assert write["is_error"] is False and "wrote 13 bytes" in "".join(write["texts"]), write
        assert read["is_error"] is False and "approved text" in "".join(read["texts"]), read
    else:
        assert_denied(
            "write_file", write["is_error"], write["structuredContent"], "".join(write["texts"]), "E_APPROVAL_DENIED"
        )
        assert json.loads("".join(write["texts"])[len(DENY_TEXT) :])["approval"] == which
        assert read["is_error"] is True
    assert_decisions(run, which, denied=answer != "accept")
    said = {(c["declared_in"], c["elicitation"], c["client"]["name"]) for c in run.clients()}
    assert said == {("request", "none" if answer is None else "form", "assay-e2e-ts-v2-elicit-client")}, said
    wraps, servers = run.pids()  # the auto-mode probe run and the session run
    assert len(wraps) == 2 and len(servers) == 2, (wraps, servers)
    await assert_all_ended(wraps + servers)
