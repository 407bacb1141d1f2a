"""End to end: what comes back, inspected (docs/policy.md, "Inspecting what comes back" and
"Resources and prompts"); the flow rules and value taint across two servers of one client are
in test_e2e_inspect_session.py.

`assay mcp wrap` around tests/e2e/leaky_server.py (a real `mcp` SDK server whose answers hold
fake secrets and injections, and one tool with a poisoned description), driven by the official
`mcp` Python SDK client and the TypeScript SDK v1 client. Each test looks at what the client
received, at what the server ran (its calls file) and at the decision log's
`assay.response.inspected` events, which never hold the secret text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from mcp.shared.exceptions import MCPError

import leaky_server as leaky
from _e2e_support import DENY_TEXT, REPO, RUN_TIMEOUT, assert_denied
from _inspect_support import (
    BASE,
    BROKEN,
    Leaky,
    POISONED_DESCRIPTION,
    README,
    REDACTED_SECRET_TEXT,
    SECRETS,
    STRIPPED,
    TOOLS,
    assert_event,
    assert_no_secret_in,
    call,
    events_by_tool,
    leaky_server,
    python_sessions,
    text_of,
    ts_client,
)


# --- mask, strip, hide; block, deny; flag -------------------------------------------------

ACTIVE = (
    BASE
    + """\
inspect:
  secrets: mask
  injection: strip
  descriptions: hide
  oversize: pass
  max_bytes: 4096
"""
)

BLOCKING = (
    BASE
    + """\
inspect:
  secrets: block
  injection: block
  descriptions: deny
  max_bytes: 4096
"""
)

FLAGGING = (
    BASE
    + """\
inspect:
  secrets: flag
  injection: flag
  descriptions: flag
"""
)

STEPS = [
    {"op": "list"},
    call("read_secret"),
    call("read_config"),
    call("read_doc"),
    call("read_mixed"),
    call("read_broken"),
    call("fetch", url="http://127.0.0.1:9/a"),
    call("poisoned", a=1, b=2),
    call("corpus", name="README.md"),
]


@dataclass
class Seen:
    """What a client saw of STEPS: tool names and descriptions, then per call (is_error,
    structuredContent, joined text)."""

    descriptions: dict[str, str | None]
    results: dict[str, tuple[bool, object, str]]


async def python_steps(server: Leaky) -> Seen:
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(server) as (session,):
            tools = await session.list_tools()
            results = {}
            for step in STEPS[1:]:
                r = await session.call_tool(step["name"], step["arguments"])
                results[step["name"]] = (r.is_error, r.structured_content, text_of(r))
    return Seen({t.name: t.description for t in tools.tools}, results)


async def ts_steps(node: str, server: Leaky) -> Seen:
    listed, *calls = await ts_client(node, server, STEPS)
    results = {}
    for line in calls:
        assert "thrown" not in line, line
        results[line["name"]] = (line["is_error"], line["structuredContent"], "".join(line["texts"]))
    return Seen(listed["descriptions"], results)


async def client_steps(client: str, node_or_none: str | None, server: Leaky) -> Seen:
    if client == "python":
        return await python_steps(server)
    assert node_or_none is not None
    return await ts_steps(node_or_none, server)


@pytest.fixture(params=["python", "ts_v1"])
def client(request) -> str:
    return request.param


@pytest.fixture
def maybe_node(client, request) -> str | None:
    return request.getfixturevalue("node") if client == "ts_v1" else None


async def test_mask_strip_hide(client, maybe_node, tmp_path, base_env):
    """secrets: mask, injection: strip, descriptions: hide, as the client sees them."""
    server = leaky_server(tmp_path, base_env, ACTIVE)
    seen = await client_steps(client, maybe_node, server)

    assert set(seen.descriptions) == TOOLS - {"poisoned"}  # hidden
    is_error, structured, text = seen.results["read_secret"]
    assert is_error is False and structured is None
    assert text == REDACTED_SECRET_TEXT, text
    is_error, structured, text = seen.results["read_config"]  # a tool with an outputSchema
    assert is_error is False
    assert structured == {
        "region": "eu-west-1",
        "github": "[REDACTED:github_token]",
        "aws": "[REDACTED:aws_access_key_id]",
    }, structured
    assert json.loads(text) == structured
    assert seen.results["read_doc"] == (False, None, STRIPPED), seen.results["read_doc"]
    assert seen.results["read_mixed"] == (False, None, REDACTED_SECRET_TEXT + "\n" + STRIPPED)
    assert seen.results["read_broken"] == (
        True,
        None,
        BROKEN + REDACTED_SECRET_TEXT + "\n" + STRIPPED,
    )  # an error result
    assert seen.results["fetch"] == (False, None, "ok")
    # hide: a hidden tool's call is not denied by inspection (only `deny` does that)
    assert seen.results["poisoned"][0] is False, seen.results["poisoned"]
    assert seen.results["corpus"] == (False, None, README)  # oversize: pass relays it unread

    events = events_by_tool(server)
    assert_event(events["read_secret"], "tools/call", "mask", "secrets", set(SECRETS))
    assert_event(events["read_config"], "tools/call", "mask", "secrets", {"github_token", "aws_access_key_id"})
    assert_event(events["read_doc"], "tools/call", "strip", "injection")
    assert_event(events["read_mixed"], "tools/call", "mask+strip", {"secrets", "injection"})
    assert_event(events["read_broken"], "tools/call", "mask+strip", {"secrets", "injection"})
    assert_event(events["poisoned"], "tools/list", "hide", "descriptions")
    assert_event(events["corpus"], "tools/call", "pass", "limits", {"oversize"})
    assert events["corpus"]["bytes"] > 4096, events["corpus"]
    assert set(events) == {
        "read_secret",
        "read_config",
        "read_doc",
        "read_mixed",
        "read_broken",
        "poisoned",
        "corpus",
    }, events
    assert isinstance(events["read_secret"]["request_id"], int)
    assert [c["url"] for c in server.calls()] == ["http://127.0.0.1:9/a"]
    assert_no_secret_in(server.logs_text())
    await server.ended()


async def test_block_and_deny(client, maybe_node, tmp_path, base_env):
    """secrets: block, injection: block, descriptions: deny: the client gets deny replies."""
    server = leaky_server(tmp_path, base_env, BLOCKING)
    seen = await client_steps(client, maybe_node, server)

    assert set(seen.descriptions) == TOOLS - {"poisoned"}
    for name in ("read_secret", "read_config", "read_doc", "read_mixed", "read_broken", "corpus"):
        is_error, structured, text = seen.results[name]
        assert_denied(name, is_error, structured, text, "E_RESPONSE_BLOCKED")
        payload = json.loads(text[len(DENY_TEXT) :])
        assert set(payload) == {"status", "error_code", "tool", "reason"}, payload
        assert_no_secret_in(text)
    assert seen.results["read_secret"][1] is not None  # no outputSchema: the payload is structuredContent
    assert seen.results["read_config"][1] is None  # an outputSchema: no structuredContent
    is_error, structured, text = seen.results["poisoned"]
    assert_denied("poisoned", is_error, structured, text, "E_TOOL_POISONED")
    assert seen.results["fetch"] == (False, None, "ok")

    events = events_by_tool(server)
    assert_event(events["read_secret"], "tools/call", "block", "secrets", set(SECRETS))
    assert_event(events["read_config"], "tools/call", "block", "secrets")
    assert_event(events["read_doc"], "tools/call", "block", "injection")
    assert_event(events["read_mixed"], "tools/call", "block", {"secrets", "injection"})
    assert_event(events["read_broken"], "tools/call", "block", {"secrets", "injection"})
    assert_event(events["corpus"], "tools/call", "block", "limits", {"oversize"})  # over max_bytes
    assert_event(events["poisoned"], "tools/list", "deny", "descriptions")
    decisions = {d["tool"]: d for d in server.run.decisions()}
    assert (decisions["poisoned"]["decision"], decisions["poisoned"]["reason_code"]) == ("deny", "P_POLICY_DENY")
    assert_no_secret_in(server.logs_text())
    await server.ended()


async def test_flag_changes_nothing(client, maybe_node, tmp_path, base_env):
    """flag: every answer reaches the client as the server sent it; the log has the findings."""
    server = leaky_server(tmp_path, base_env, FLAGGING)
    seen = await client_steps(client, maybe_node, server)

    assert set(seen.descriptions) == TOOLS
    assert seen.descriptions["poisoned"] == POISONED_DESCRIPTION
    assert seen.results["read_secret"] == (False, None, leaky.secret_text())
    assert seen.results["read_doc"] == (False, None, leaky.injected_text())
    assert seen.results["poisoned"] == (False, None, "3")
    assert seen.results["read_config"][1]["github"] == SECRETS["github_token"]
    assert seen.results["read_mixed"] == (False, None, leaky.secret_text() + "\n" + leaky.injected_text())
    assert seen.results["corpus"] == (False, None, README)
    assert seen.results["read_broken"] == (True, None, BROKEN + leaky.secret_text() + "\n" + leaky.injected_text())

    events = events_by_tool(server)
    assert_event(events["read_secret"], "tools/call", "flag", "secrets", set(SECRETS))
    assert_event(events["read_doc"], "tools/call", "flag", "injection")
    assert_event(events["read_mixed"], "tools/call", "flag", {"secrets", "injection"})
    assert_event(events["read_broken"], "tools/call", "flag", {"secrets", "injection"})
    assert_event(events["poisoned"], "tools/list", "flag", "descriptions")
    assert set(events) == {"read_secret", "read_config", "read_doc", "read_mixed", "read_broken", "poisoned"}, events
    assert_no_secret_in(server.logs_text())
    await server.ended()


async def test_dry_run_changes_nothing_and_says_would(tmp_path, base_env):
    """--dry-run with mask, strip, hide and oversize: pass: the client gets every answer as the
    server sent it, and the events say what enforcing would have done."""
    server = leaky_server(tmp_path, base_env, ACTIVE, dry_run=True)
    seen = await python_steps(server)

    assert set(seen.descriptions) == TOOLS
    assert seen.results["read_secret"] == (False, None, leaky.secret_text())
    assert seen.results["read_doc"] == (False, None, leaky.injected_text())
    assert seen.results["read_mixed"] == (False, None, leaky.secret_text() + "\n" + leaky.injected_text())
    events = events_by_tool(server)
    assert_event(events["read_secret"], "tools/call", "would_mask", "secrets", set(SECRETS))
    assert_event(events["read_doc"], "tools/call", "would_strip", "injection")
    assert_event(events["read_mixed"], "tools/call", "would_mask+strip", {"secrets", "injection"})
    assert_event(events["poisoned"], "tools/list", "would_hide", "descriptions")
    assert_no_secret_in(server.logs_text())
    await server.ended()


async def test_error_answers_are_inspected(tmp_path, base_env):
    """A server can put anything in a JSON-RPC error's `message` and `data` (here a tool and a
    resource whose errors hold the secrets and the injection of read_mixed). Under mask and
    strip the client must not get them as they are."""
    server = leaky_server(tmp_path, base_env, ACTIVE)
    errors = []
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(server) as (session,):
            with pytest.raises(MCPError) as raised:
                await session.call_tool("read_rpc_error", {})
            errors.append(raised.value)
            with pytest.raises(MCPError) as raised:
                await session.read_resource(f"file://{tmp_path}/allowed/broken.txt")
            errors.append(raised.value)
    await server.ended()
    for err in errors:
        seen = err.message + json.dumps(err.data)
        assert leaky.PHRASE not in seen and leaky.TAGS not in seen, seen
        assert_no_secret_in(seen)


# --- resources and prompts -----------------------------------------------------------------

RESOURCES = (
    BASE
    + """\
path_confinement:
  - { tools: [read_file], args: [path], within: [ALLOWED] }
resources:
  allow: ["file://*"]
  deny: ["*secret*"]
prompts:
  deny: ["debug_*"]
inspect:
  secrets: mask
"""
)
SUMMARY = "Summarize tides in three sentences."


def resource_cases(tmp_path: Path) -> list[tuple[str, str, str | None, list[str] | None]]:
    """(op, target, the deny's error_code, or None and the texts the client gets)."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    return [
        ("read", f"file://{allowed}/note.txt", None, ["an allowed note"]),
        ("read", f"file://{allowed}/keys.txt", None, [REDACTED_SECRET_TEXT]),  # contents are inspected
        ("read", f"file://{outside}/data.txt", "E_PATH_CONFINEMENT", None),
        ("read", f"file://{allowed}/../outside/data.txt", "E_PATH_CONFINEMENT", None),
        ("read", f"file://{allowed}/%2e%2e/outside/data.txt", "E_PATH_CONFINEMENT", None),
        ("read", f"file://localhost{outside}/data.txt", "E_PATH_CONFINEMENT", None),
        ("read", f"file://evil.example{allowed}/note.txt", "E_PATH_CONFINEMENT", None),  # another host
        ("read", f"file://{allowed}/secret.txt", "E_RESOURCE_DENIED", None),
        ("prompt", "summarize", None, [SUMMARY]),
        ("prompt", "debug_dump", "E_PROMPT_DENIED", None),
    ]


def assert_resource_deny(op: str, target: str, code: str, error_code: int, message: str, data: object) -> None:
    assert error_code == -32003, (target, error_code)
    assert message.endswith(DENY_TEXT), message  # the TS SDK prefixes "MCP error -32003: "
    assert isinstance(data, dict), data
    assert data["status"] == "deny" and data["error_code"] == code, data
    assert data["method"] == ("resources/read" if op == "read" else "prompts/get"), data
    assert data["target"] == target and data["reason"], data


def assert_resource_logs(server: Leaky, tmp_path: Path) -> None:
    cases = resource_cases(tmp_path)
    # the server read only the resources the policy let through
    assert server.calls() == [{"resource": target} for op, target, code, _ in cases if op == "read" and not code]
    denied = [
        f"{'resources/read' if op == 'read' else 'prompts/get'} {target}" for op, target, code, _ in cases if code
    ]
    decisions = [d for d in server.run.decisions() if d["decision"] == "deny"]
    assert [d["tool"] for d in decisions] == denied, decisions
    events = server.run.inspected()
    assert len(events) == 1, events
    assert events[0]["uri"] == cases[1][1], events
    assert_event(events[0], "resources/read", "mask", "secrets", set(SECRETS))
    assert_no_secret_in(server.logs_text())


async def test_resources_and_prompts_python_sdk(tmp_path, base_env):
    server = leaky_server(tmp_path, base_env, RESOURCES)
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(server) as (session,):
            for op, target, code, expected in resource_cases(tmp_path):
                try:
                    if op == "read":
                        got = await session.read_resource(target)
                        texts = [getattr(c, "text", None) for c in got.contents]
                    else:
                        prompt = await session.get_prompt(target, {"topic": "tides"} if target == "summarize" else {})
                        texts = [getattr(m.content, "text", None) for m in prompt.messages]
                except MCPError as err:
                    assert code is not None, (target, err)
                    assert_resource_deny(op, target, code, err.code, err.message, err.data)
                    continue
                assert code is None, (target, texts)
                assert texts == expected, (target, texts)
    assert_resource_logs(server, tmp_path)
    await server.ended()


async def test_resources_and_prompts_ts_v1(node, tmp_path, base_env):
    server = leaky_server(tmp_path, base_env, RESOURCES)
    cases = resource_cases(tmp_path)
    steps = [
        {"op": "read", "uri": t}
        if op == "read"
        else {"op": "prompt", "name": t, "arguments": {"topic": "tides"} if t == "summarize" else {}}
        for op, t, _code, _texts in cases
    ]
    lines = await ts_client(node, server, steps)
    for (op, target, code, expected), line in zip(cases, lines, strict=True):
        if code is None:
            assert "thrown" not in line, line
            assert line["texts"] == expected, (target, line)
        else:
            assert "thrown" in line, line
            assert_resource_deny(op, target, code, line["code"], line["thrown"], line["data"])
    assert_resource_logs(server, tmp_path)
    await server.ended()


# --- innocent content: no finding ----------------------------------------------------------

EVERYTHING_FLAGGED = (
    BASE
    + """\
inspect:
  secrets: flag
  injection: flag
  descriptions: flag
  arguments: { secrets: flag, tainted: flag }
"""
)


def corpus_names() -> list[str]:
    """Every docs page, the README, every source file of the package, and the generated hex
    digests, UUIDs and base64 PNG."""
    docs = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
    sources = sorted(str(p.relative_to(REPO)) for p in (REPO / "assay").rglob("*.py"))
    return [*docs, "README.md", *sources, "shas", "uuids", "png"]


async def test_innocent_corpus_makes_no_finding(tmp_path, base_env):
    """With every check on, the project's own docs and code, hex digests, UUIDs and a base64 PNG
    make no `assay.response.inspected` event (a false positive would mask or block them). The
    docs build their secret examples from pieces (docs/inspect.md). Last, `read_secret` is the
    positive control: its answer must make the one event (so no event elsewhere means
    innocent, not unread)."""
    server = leaky_server(tmp_path, base_env, EVERYTHING_FLAGGED, innocent=True)
    names = corpus_names()
    assert len(names) > 40, names
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(server) as (session,):
            tools = await session.list_tools()
            texts = {}
            for name in names:
                r = await session.call_tool("corpus", {"name": name})
                assert r.is_error is False, (name, r)
                texts[name] = text_of(r)
            control = await session.call_tool("read_secret", {})
            assert control.is_error is False
    assert {t.name for t in tools.tools} == TOOLS - {"poisoned"}
    assert texts["README.md"] == (REPO / "README.md").read_text()
    ids = [d["request_id"] for d in server.run.decisions()]
    assert len(ids) == len(names) + 1, ids
    name_of = dict(zip(ids, [*names, "read_secret"], strict=True))
    findings = [(name_of.get(e.get("request_id"), e.get("tool")), e["findings"]) for e in server.run.inspected()]
    assert [name for name, _ in findings].count("read_secret") == 1, findings
    innocent = [
        f"{name}: {f['check']}/{f['kind']} at {f['pointer']}"
        for name, fs in findings
        if name != "read_secret"
        for f in fs
    ]
    assert innocent == [], "findings on innocent content:\n" + "\n".join(innocent)
    await server.ended()
