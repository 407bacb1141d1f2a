"""`policy suggest` and approvals (docs/log.md, "assay mcp policy suggest"): a destructive tool is
put behind an approval only when the clients that called it can answer one (their
`assay.client.capabilities` records); the file and the summary say what needs approval, what a
client without elicitation gets, and which tools were left unconfined and why."""

from __future__ import annotations

import json

from assay.logs.entries import Entry, parse_line
from assay.logs.suggest import Observed, suggest
from assay.policy import load_policy

T = "2026-08-22T10:15:02.123456+00:00"
WRITE = {"tool": "write_file", "annotations": {"destructiveHint": True}}


def call(tool: str, session: str | None = "client:1:1", server: str = "fs", **arguments) -> Entry:
    data = {"tool": tool, "decision": "allow", "server": server, "session": session, "reason_code": "P_POLICY_ALLOW"}
    if arguments:
        data["arguments"] = arguments
    e = parse_line(json.dumps({"specversion": "1.0", "type": "assay.tool.decision", "time": T, "data": data}).encode())
    assert isinstance(e, Entry)
    return e


def client(elicitation: str, session: str | None = "client:1:1", server: str = "fs", name: str = "host") -> dict:
    return {
        "declared_in": "initialize",
        "client": {"name": name},
        "elicitation": elicitation,
        "session": session,
        "server": server,
    }


def approval_summary(plan) -> list[str]:
    from assay.logs.suggest_text import approval_summary as summary

    return summary(plan)


def run(calls: list[Entry], clients=(), listed=(WRITE,)):
    observed = Observed()
    for c in calls:
        observed.call(c)
    for data in listed:
        observed.listing(data)
    for data in clients:
        observed.client(data)
    return suggest(observed, lambda: iter(calls), home="/home/ann", header=["test"])


def test_a_client_that_can_answer_gets_the_approval_and_the_fallback_is_written():
    result = run([call("write_file"), call("read_file")], [client("form")])
    policy = load_policy(result.text.encode())
    assert policy.tools.approval_required == ("write_file",)
    assert policy.tools.approval_fallback == "deny" and "approval_fallback: deny" in result.text
    assert result.approvals == 1
    [line] = approval_summary(result.plan)
    assert line.startswith('approval needed for "write_file"') and "tools.approval_fallback: deny" in line


def test_an_everyday_tool_of_a_client_without_elicitation_is_not_put_behind_an_approval():
    for mode in ("none", "url"):
        result = run([call("write_file"), call("read_file")], [client(mode, name="claude-code")])
        policy = load_policy(result.text.encode())
        assert policy.tools.approval_required is None and policy.tools.approval_fallback is None
        assert result.approvals == 0
        assert '#   "write_file" (client "claude-code")' in result.text
        assert "cannot answer" in result.text
        [line] = approval_summary(result.plan)
        assert line.startswith('left without approval though annotated destructive: "write_file"')


def test_one_client_that_cannot_answer_is_enough_and_a_record_that_can_is_enough_for_its_wrap():
    calls = [call("write_file", session="a"), call("write_file", session="b")]
    result = run(calls, [client("form", session="a"), client("none", session="b")])
    assert load_policy(result.text.encode()).tools.approval_required is None
    # a wrap whose client re-initialized with elicitation can answer (sometimes: it is asked)
    result = run(calls, [client("form", session="a"), client("none", session="b"), client("form", session="b")])
    assert load_policy(result.text.encode()).tools.approval_required == ("write_file",)


def test_logs_without_client_records_keep_the_approval_and_say_so():
    result = run([call("write_file"), call("read_file")])
    assert load_policy(result.text.encode()).tools.approval_required == ("write_file",)
    assert "the logs do not say whether the clients that called these can answer an approval" in result.text
    lines = approval_summary(result.plan)
    assert len(lines) == 2 and "do not say" in lines[1]


def test_unconfined_tools_are_named_with_why():
    calls = [call("read_file", path="/srv/a/x"), call("search", query="q"), call("write_file")]
    result = run(calls, [client("form")])
    text = result.text
    assert '#   "search": no argument held only absolute paths in every recorded call' in text
    assert '#   "write_file": no call had recorded arguments (wrap ran without --log-arguments)' in text
    assert '"read_file"' not in text.split("are not confined, and why")[1]  # it is confined
    policy = load_policy(text.encode())
    assert [r.tools for r in policy.path_confinement] == [("read_file",)]


def test_the_file_points_to_help_pages_never_to_docs_and_ends_with_a_newline():
    result = run([call("write_file"), call("read_file")], [client("form")])
    assert "docs/" not in result.text and ".md" not in result.text
    assert "assay mcp policy --help" in result.text
    assert result.text.endswith("\n") and not result.text.endswith("\n\n")
