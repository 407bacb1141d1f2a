"""End to end: per-tool rate limits (docs/policy.md, "Per-tool rate limits") with the official
`mcp` Python SDK client through `assay mcp wrap` to the SDK demo server (examples/demo_server.py),
under the page's `rate-limits` example. Its read rule has a one-hour window, so the call past the
limit comes well inside it on any machine: no sleeps, no timing.
"""

from __future__ import annotations

import json
import sys

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from _e2e_support import DEMO_SERVER, DENY_TEXT, RUN_TIMEOUT, WrapRun, assert_all_ended
from tests.docs_examples import policy_example

READ_REASON = "Rate limit exceeded: at most 3 calls per 1h for read_file, list_dir (rule reads-per-hour)"
LIST_REASON = "Rate limit exceeded: at most 2 calls per session for list_dir (rule limits.tools[2])"

# (tool, arguments, the rule that denies it or None)
CALLS = [
    ("list_dir", {"path": "/workspace"}, None),
    ("list_dir", {"path": "/workspace"}, None),
    ("list_dir", {"path": "/workspace"}, "limits.tools[2]"),  # two per session; not counted
    ("read_file", {"path": "/workspace/README.md"}, None),  # third of reads-per-hour
    ("read_file", {"path": "/workspace/notes.txt"}, "reads-per-hour"),  # the 4th in the hour
    ("read_file", {"path": "/workspace/notes.txt"}, "reads-per-hour"),
]


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def _run(run: WrapRun, env: dict[str, str]) -> list:
    params = StdioServerParameters(command=run.argv[0], args=run.argv[1:], env=env)
    with trio.fail_after(RUN_TIMEOUT), run.stderr.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                return [await session.call_tool(name, args) for name, args, _ in CALLS]


async def test_the_call_past_the_limit_is_denied_naming_the_rule(tmp_path, base_env):
    policy = tmp_path / "rate-limits.yaml"
    policy.write_text(policy_example("rate-limits"))
    run = WrapRun(tmp_path, policy, [sys.executable, str(DEMO_SERVER)])
    results = await _run(run, base_env)

    for (name, _args, rule), result in zip(CALLS, results, strict=True):
        if rule is None:
            assert result.is_error is False, (name, result)
            assert DENY_TEXT not in _text(result)
            continue
        assert result.is_error is True, (name, result)
        text = _text(result)
        assert text.startswith(DENY_TEXT), text
        payload = json.loads(text[len(DENY_TEXT) :])
        reason = READ_REASON if rule == "reads-per-hour" else LIST_REASON
        assert payload == {"status": "deny", "error_code": "E_RATE_LIMIT", "tool": name, "rule": rule, "reason": reason}
        # the demo server's tools declare an outputSchema: the payload is in content only
        # (docs/wrap.md, "Deny replies")
        assert result.structured_content is None
    assert "Hello from the demo server." in _text(results[3])

    decisions = run.decisions()
    assert [d["tool"] for d in decisions] == [name for name, _, _ in CALLS]
    for (name, _args, rule), d in zip(CALLS, decisions, strict=True):
        if rule is None:
            assert (d["decision"], d["reason_code"]) == ("allow", "P_POLICY_ALLOW"), d
            assert d["matched_rule"] == "tools.allow", d
        else:
            assert (d["decision"], d["reason_code"], d["typed_decision"]) == ("deny", "P_RATE_LIMIT", "deny"), d
            assert d["matched_rule"] == rule, d
            assert d["policy_deny"] is True
    audits = run.audits()
    assert [a["decision"] for a in audits] == ["allow", "allow", "deny", "allow", "deny", "deny"]
    assert audits[4]["agentic"]["error_code"] == "E_RATE_LIMIT" and audits[4]["reason"] == READ_REASON
    stderr = run.stderr_text()
    assert f'[assay] DENY "read_file" (reason: {json.dumps(READ_REASON)})' in stderr, stderr

    wraps, servers = run.pids()
    assert len(wraps) == 1 and len(servers) == 1, (wraps, servers)
    await assert_all_ended(wraps + servers)


async def test_a_dry_run_forwards_the_call_past_the_limit_and_logs_the_rule(tmp_path, base_env):
    policy = tmp_path / "rate-limits.yaml"
    policy.write_text(policy_example("rate-limits"))
    run = WrapRun(tmp_path, policy, [sys.executable, str(DEMO_SERVER)], dry_run=True)
    results = await _run(run, base_env)

    assert all(DENY_TEXT not in _text(r) for r in results)
    assert "remember: policies are code" in _text(results[4])  # the server answered it
    decisions = run.decisions()
    assert [d["reason_code"] for d in decisions] == [
        "P_POLICY_ALLOW",
        "P_POLICY_ALLOW",
        "P_RATE_LIMIT",
        "P_POLICY_ALLOW",
        "P_RATE_LIMIT",
        "P_RATE_LIMIT",
    ]
    assert all(d["decision"] == "allow" for d in decisions)
    assert [d["matched_rule"] for d in decisions if d["reason_code"] == "P_RATE_LIMIT"] == [
        "limits.tools[2]",
        "reads-per-hour",
        "reads-per-hour",
    ]
    assert [a["decision"] for a in run.audits()] == [
        "allow",
        "allow",
        "would_deny",
        "allow",
        "would_deny",
        "would_deny",
    ]
    wraps, servers = run.pids()
    await assert_all_ended(wraps + servers)
