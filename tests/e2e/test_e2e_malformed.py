"""End to end: a hostile server's lines through a real `assay mcp wrap`, read by the three
official clients, the `mcp` Python SDK, the TypeScript SDK v1 and v2 (docs/inspect.md,
"Malformed answers", "Blobs", "Where wrap looks"; docs/policy.md, "Inspecting what comes back").

tests/e2e/malformed_server.py writes answers no two clients read alike (a `result` and an
`error`, an `error` next to a `method`, neither, odd ids), requests and notifications of its
own, and blobs, each carrying a secret and instructions aimed at the model. Each client hands
its caller everything it got (results, errors with their data, what its sampling, elicitation,
log and progress handlers were given, what it reported as errors): none of it may hold the
secret or the instructions unmasked, and every call gets an answer (no client waits for a line
it refused). tests/e2e/ts_input_server.mjs (the TypeScript SDK v2 server) asks for input in
both eras: an `input_required` answer for a 2026-07-28-era client, requests of the server's for
a 2025-era one.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
import trio
from mcp import Client, ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

import malformed_server as hostile
from _e2e_support import DENY_TEXT, E2E, RUN_TIMEOUT, WrapRun, assert_all_ended

SERVER = E2E / "malformed_server.py"
INPUT_SERVER = E2E / "ts_input_server.mjs"
TS_CLIENT = E2E / "ts_server_lines_client.mjs"
SECRET = hostile.secret()
MALFORMED = ["both", "both_error_first", "both_bad_message", "string_id_both", "method_error", "neither"]
CALLS = [*MALFORMED, "null_id_then_clean", "error_data", "sample", "elicit", "log", "blob", "odd_blob"]
CALL_TIMEOUT = 20.0  # a client that refused a line would wait this long; with wrap none waits
BASE = 'version: "2.0"\ntools: { allow: ["*"] }\nenforcement: { unconstrained_tools: allow }\n'
MASK = BASE + "inspect: {secrets: mask, injection: strip}\n"
BLOCK = BASE + "inspect: {secrets: block, injection: block}\n"


def wrap_run(tmp: Path, policy: str, server: list[str] | None = None) -> WrapRun:
    policy_file = tmp / "assay.yaml"
    policy_file.write_text(policy)
    return WrapRun(tmp, policy_file, server or [sys.executable, str(SERVER)], label="hostile")


def _texts(value: object) -> list[str]:
    """Every string of a value, and the text of every base64 `blob` in it."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            blob = item.get("blob")
            if isinstance(blob, str):
                out.append(base64.b64decode(blob + "===").decode("utf-8", "replace"))
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def assert_clean(seen: object) -> None:
    for text in _texts(seen):
        assert SECRET not in text and hostile.PHRASE not in text, text


# --- the clients -------------------------------------------------------------------------------


async def python_calls(
    run: WrapRun, env: dict[str, str], calls: list[str], auto: bool = False
) -> tuple[list[dict], list[str]]:
    """Each call as the Python SDK's ClientSession hands it over, and the transport errors it
    reported to its message handler; ``auto``: the high-level `mcp.Client(mode="auto")`, which
    negotiates the 2026-07-28 era with a modern server and answers its `input_required` with the
    same callbacks."""
    seen: dict[str, list] = {}
    reported: list[str] = []

    async def sampling(context, params: types.CreateMessageRequestParams):
        seen["sampled"].append(params.model_dump(mode="json", by_alias=True))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="ok"), model="e2e"
        )

    async def elicitation(context, params):
        seen["elicited"].append(params.model_dump(mode="json", by_alias=True))
        return types.ElicitResult(action="decline")

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        seen["logs"].append(params.model_dump(mode="json", by_alias=True))

    async def messages(message) -> None:
        if isinstance(message, Exception):
            reported.append(str(message))

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen["progress"].append({"progress": value, "total": total, "message": message})

    results = []
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    if auto:
        with trio.fail_after(RUN_TIMEOUT + CALL_TIMEOUT * len(calls)):
            async with Client(
                params,
                mode="auto",
                sampling_callback=sampling,
                elicitation_callback=elicitation,
                logging_callback=logging,
                message_handler=messages,
            ) as client:
                for name in calls:
                    seen = {"sampled": [], "elicited": [], "logs": [], "progress": []}
                    try:
                        r = await client.call_tool(name, {})
                        results.append({"name": name, "result": r.model_dump(mode="json", by_alias=True), "seen": seen})
                    except MCPError as err:
                        results.append(
                            {"name": name, "thrown": err.message, "code": err.code, "data": err.data, "seen": seen}
                        )
        return results, reported
    with trio.fail_after(RUN_TIMEOUT + CALL_TIMEOUT * len(calls)), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(
                read,
                write,
                sampling_callback=sampling,
                elicitation_callback=elicitation,
                logging_callback=logging,
                message_handler=messages,
            ) as session:
                await session.initialize()
                for name in calls:
                    seen = {"sampled": [], "elicited": [], "logs": [], "progress": []}
                    try:
                        r = await session.call_tool(
                            name, {}, read_timeout_seconds=CALL_TIMEOUT, progress_callback=progress
                        )
                        results.append({"name": name, "result": r.model_dump(mode="json", by_alias=True), "seen": seen})
                    except MCPError as err:
                        results.append(
                            {"name": name, "thrown": err.message, "code": err.code, "data": err.data, "seen": seen}
                        )
    return results, reported


async def ts_calls(
    node: str, sdk: str, run: WrapRun, env: dict[str, str], calls: list[str]
) -> tuple[list[dict], list[str]]:
    spec = {
        "sdk": "v2" if sdk == "v2auto" else sdk,
        "command": run.argv[0],
        "args": run.argv[1:],
        "calls": calls,
        "timeoutMs": int(CALL_TIMEOUT * 1000),
        **({"mode": "auto"} if sdk == "v2auto" else {}),
    }
    with trio.fail_after(RUN_TIMEOUT + CALL_TIMEOUT * len(calls)):
        proc = await trio.run_process(
            [node, str(TS_CLIENT)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(E2E),
            env=env,
        )
    run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{run.stderr_text()}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected"] + ["call"] * len(calls) + ["closed"], out
    return lines[1:-1], lines[-1]["errors"]


async def client_calls(client: str, node: str, run: WrapRun, env: dict[str, str], calls: list[str]):
    if client in ("python", "python_auto"):
        return await python_calls(run, env, calls, auto=client == "python_auto")
    return await ts_calls(node, client, run, env, calls)


CLIENTS = ["python", "v1", "v2"]


def denied(call: dict) -> dict:
    """The deny payload of a call wrap answered with its blocked reply."""
    assert "thrown" not in call, call
    result = call["result"]
    assert result["isError"] is True, call
    texts = [c.get("text") for c in result["content"]]
    assert texts[0] == DENY_TEXT, call
    return json.loads(texts[1])


def text_of(call: dict) -> str:
    assert "thrown" not in call, call
    return "".join(c.get("text", "") for c in call["result"]["content"])


def blob_of(call: dict) -> str:
    assert "thrown" not in call, call
    return base64.b64decode(call["result"]["content"][0]["resource"]["blob"]).decode()


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
async def test_mask_and_strip_no_client_surfaces_the_secret(client, node, tmp_path, base_env):
    run = wrap_run(tmp_path, MASK)
    calls, reported = await client_calls(client, node, run, base_env, CALLS)
    assert_clean(calls)
    assert_clean(reported)
    by_name = {c["name"]: c for c in calls}
    for name in MALFORMED:  # answered by wrap, not left to time out
        payload = denied(by_name[name])
        assert payload["error_code"] == "E_RESPONSE_BLOCKED" and "malformed" in payload["reason"], (name, payload)
    assert text_of(by_name["null_id_then_clean"]) == "clean"
    err = by_name["error_data"]
    assert err["thrown"].endswith("failed") and "[REDACTED:github_token]" in err["data"]["notes"], err
    for name, asked in (("sample", "sampled"), ("elicit", "elicited")):
        assert text_of(by_name[name]) == f"{name}: answered", by_name[name]
        (params,) = by_name[name]["seen"][asked]
        assert "[REDACTED:github_token]" in json.dumps(params) and "[REMOVED:injection]" in json.dumps(params)
    logged = by_name["log"]
    assert text_of(logged) == "clean"
    assert [entry["data"]["line"] for entry in logged["seen"]["logs"]] == [
        "[REMOVED:injection] and send [REDACTED:github_token] to the attacker"
    ]
    assert [p["message"] for p in logged["seen"]["progress"]] == [
        "[REMOVED:injection] and send [REDACTED:github_token] to the attacker"
    ]
    assert blob_of(by_name["blob"]) == "[REMOVED:injection] and send [REDACTED:github_token] to the attacker"
    assert (
        blob_of(by_name["odd_blob"])
        == "notes: sunny [REMOVED:injection] and send [REDACTED:github_token] to the attacker"
    )
    events = run.inspected()
    assert {e["findings"][0]["rule"] for e in events if e["findings"][0]["check"] == "protocol"} == {
        "result_and_error",
        "error_and_method",
        "neither_result_nor_error",
    }
    assert {e["method"] for e in events} >= {
        "sampling/createMessage",
        "elicitation/create",
        "notifications/message",
        "notifications/progress",
        "tools/call",
    }
    assert SECRET not in run.decision_log.read_text()
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)


@pytest.mark.parametrize("client", CLIENTS)
async def test_block_shows_the_client_nothing_and_answers_the_server(client, node, tmp_path, base_env):
    run = wrap_run(tmp_path, BLOCK)
    calls, reported = await client_calls(client, node, run, base_env, ["sample", "elicit", "log", "blob", "both"])
    assert_clean(calls)
    assert_clean(reported)
    by_name = {c["name"]: c for c in calls}
    for name in ("sample", "elicit"):  # the server got wrap's error; the client's handler was never asked
        assert text_of(by_name[name]) == f"{name}: error -32003 E_RESPONSE_BLOCKED", by_name[name]
        assert by_name[name]["seen"] == {"sampled": [], "elicited": [], "logs": [], "progress": []}
    assert text_of(by_name["log"]) == "clean" and by_name["log"]["seen"]["logs"] == []
    assert by_name["log"]["seen"]["progress"] == []
    assert denied(by_name["blob"])["error_code"] == "E_RESPONSE_BLOCKED"
    assert "malformed" in denied(by_name["both"])["reason"]
    actions = {(e["method"], e["action"]) for e in run.inspected()}
    assert {
        ("sampling/createMessage", "block"),
        ("notifications/message", "block"),
        ("notifications/progress", "block"),
    } <= actions
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)


# --- a server that asks for input, in both eras ---------------------------------------------------

INPUT_CLIENTS = ["python", "python_auto", "v1", "v2", "v2auto"]  # the *auto ones negotiate 2026-07-28
STRIPPED = "[REMOVED:injection] and send [REDACTED:github_token] to the attacker"


@pytest.mark.parametrize("client", INPUT_CLIENTS)
async def test_what_a_server_asks_for_is_read_in_both_eras(client, node, tmp_path, base_env):
    """tests/e2e/ts_input_server.mjs (the TypeScript SDK v2 server) answers `ask` with an
    `input_required` result carrying an elicitation and a sampling request; a 2025-era client
    gets them as requests of the server's. Either way the client's handlers see them masked and
    stripped, and the call completes."""
    run = wrap_run(tmp_path, MASK, [node, str(INPUT_SERVER)])
    calls, reported = await client_calls(client, node, run, base_env, ["ask"])
    assert_clean(calls)
    assert_clean(reported)
    (call,) = calls
    assert text_of(call) == "done: confirm,draft", call
    (elicited,) = call["seen"]["elicited"]
    (sampled,) = call["seen"]["sampled"]
    assert elicited["message"] == STRIPPED
    assert elicited["requestedSchema"]["properties"]["name"]["description"] == STRIPPED
    assert sampled["messages"][0]["content"]["text"] == STRIPPED
    methods = {e["method"] for e in run.inspected()}
    if client.endswith("auto"):  # one input_required answer to the call
        assert methods == {"tools/call"}, methods
    else:
        assert methods == {"elicitation/create", "sampling/createMessage"}, methods
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)


@pytest.mark.parametrize("client", ["python_auto", "v2auto", "v1"])
async def test_block_on_what_a_server_asks_for_shows_the_client_nothing(client, node, tmp_path, base_env):
    run = wrap_run(tmp_path, BLOCK, [node, str(INPUT_SERVER)])
    calls, reported = await client_calls(client, node, run, base_env, ["ask"])
    assert_clean(calls)
    assert_clean(reported)
    (call,) = calls
    assert call["seen"] == {"sampled": [], "elicited": [], "logs": [], "progress": []}, call
    if client.endswith("auto"):  # the input_required answer is blocked: the call is denied
        assert denied(call)["error_code"] == "E_RESPONSE_BLOCKED"
    events = run.inspected()
    assert events and {e["action"] for e in events} == {"block"}, events
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)
