"""End to end: what comes back, inspected (docs/policy.md, "Inspecting what comes back",
"Resources and prompts" and, in "Flow rules", the response selectors).

`assay mcp wrap` around tests/e2e/leaky_server.py (a real `mcp` SDK server whose answers hold
fake secrets and injections, and one tool with a poisoned description), driven by the official
`mcp` Python SDK client and the TypeScript SDK v1 client. Each test looks at what the client
received, at what the server ran (its calls file) and at the decision log's
`assay.response.inspected` events, which never hold the secret text.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

import leaky_server as leaky
from _e2e_support import DENY_TEXT, E2E, REPO, RUN_TIMEOUT, WrapRun, assert_all_ended, assert_denied

LEAKY = E2E / "leaky_server.py"
TS_V1_CLIENT = E2E / "ts_v1_client.mjs"
TS_V1_MULTI = E2E / "ts_v1_multi_client.mjs"
SECRETS = leaky.fake_secrets()
REDACTED_SECRET_TEXT = leaky.secret_text()
for _kind, _value in SECRETS.items():
    REDACTED_SECRET_TEXT = REDACTED_SECRET_TEXT.replace(_value, f"[REDACTED:{_kind}]")
# read_doc's answer once stripped: the invisible characters and escapes gone, the phrase replaced
STRIPPED = leaky.injected_text().replace(leaky.PHRASE, "[REMOVED:injection]")
for _invisible in (leaky.TAGS, leaky.ZERO_WIDTH, leaky.BIDI, leaky.ANSI):
    STRIPPED = STRIPPED.replace(_invisible, "")
POISONED_DESCRIPTION = f"Add two numbers. {leaky.POISON}"
TOOLS = {"read_secret", "read_config", "read_doc", "read_mixed", "read_broken", "read_rpc_error", "poisoned", "fetch",
         "send", "corpus"}
BROKEN = "Error executing tool read_broken: "  # how the SDK server words a ToolError's result
README = (REPO / "README.md").read_text()
assert len(README) > 4096  # over the max_bytes of ACTIVE and BLOCKING

BASE = """\
version: "2.0"
tools: { allow: ["*"] }
enforcement: { unconstrained_tools: allow }
"""


# --- set-up -------------------------------------------------------------------------------


@dataclass
class Leaky:
    """One wrap around one leaky server: its WrapRun, the environment its client gives it, and
    the server's calls file."""

    run: WrapRun
    env: dict[str, str]
    calls_file: Path

    def calls(self) -> list[dict]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def logs_text(self) -> str:
        """What wrap wrote: decision log, audit log and its own `[assay]` lines on stderr (the
        rest of stderr is the server's own, which logs the failing tools' messages)."""
        paths = (self.run.decision_log, self.run.audit_log)
        own = [line for line in self.run.stderr_text().splitlines() if line.startswith("[assay]")]
        return "".join(p.read_text(errors="replace") for p in paths if p.exists()) + "\n".join(own)

    async def ended(self) -> None:
        wraps, servers = self.run.pids()
        assert len(servers) == 1, servers
        await assert_all_ended(wraps + servers)


def leaky_server(tmp_path: Path, base_env: dict[str, str], policy: str, label: str = "leaky",
                 innocent: bool = False, dry_run: bool = False) -> Leaky:
    home = tmp_path / label
    home.mkdir()
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir(exist_ok=True)
    outside.mkdir(exist_ok=True)
    policy_file = home / "assay.yaml"
    policy_file.write_text(policy.replace("ALLOWED", str(allowed)))
    run = WrapRun(home, policy_file, [sys.executable, str(LEAKY)], label=label, dry_run=dry_run)
    calls = home / "calls.ndjson"
    env = {**base_env, "LEAKY_CALLS": str(calls), "LEAKY_ROOT": str(REPO), "LEAKY_ALLOWED": str(allowed),
           "LEAKY_OUTSIDE": str(outside), "LEAKY_INNOCENT": "1" if innocent else "0"}
    return Leaky(run, env, calls)


@asynccontextmanager
async def python_sessions(*servers: Leaky) -> AsyncIterator[list[ClientSession]]:
    """One Python SDK `ClientSession` per server, all in this process (one client: docs/wrap.md,
    "Shared sessions")."""
    async with AsyncExitStack() as stack:
        sessions = []
        for server in servers:
            params = StdioServerParameters(command=server.run.argv[0], args=server.run.argv[1:], env=server.env)
            errlog = stack.enter_context(server.run.stderr.open("w"))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        yield sessions


def text_of(result: object) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", []))


async def ts_client(node: str, server: Leaky, steps: list[dict]) -> list[dict]:
    """Run ts_v1_client.mjs against one wrapped server; return the lines of its steps."""
    spec = {"command": server.run.argv[0], "args": server.run.argv[1:], "steps": steps,
            "timeoutMs": int(RUN_TIMEOUT * 1000)}
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process([node, str(TS_V1_CLIENT)], stdin=json.dumps(spec).encode(),
                                      capture_stdout=True, capture_stderr=True, check=False, cwd=str(E2E),
                                      env=server.env)
    server.run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"ts_v1_client exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{server.run.stderr_text()}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines][0] == "connected" and lines[-1]["kind"] == "closed", out
    assert lines[-1]["errors"] == [], lines[-1]
    assert len(lines) == len(steps) + 2, out
    return lines[1:-1]


async def ts_multi(node: str, servers: dict[str, Leaky], steps: list[dict], env: dict[str, str], cwd: Path) -> list[dict]:
    """Run ts_v1_multi_client.mjs (one host process, one Client per server)."""
    spec = {
        "servers": {name: {"command": s.run.argv[0], "args": s.run.argv[1:], "env": s.env} for name, s in servers.items()},
        "timeoutMs": int(RUN_TIMEOUT * 1000),
        "steps": steps,
    }
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process([node, str(TS_V1_MULTI)], stdin=json.dumps(spec).encode(), capture_stdout=True,
                                      capture_stderr=True, check=False, cwd=str(cwd), env=env)
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr.decode(errors='replace')}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected"] * len(servers) + [s.get("op", "call") for s in steps] + ["closed"], out
    assert lines[-1]["errors"] == [], lines[-1]
    return lines[len(servers):-1]


def call(tool: str, **arguments: object) -> dict:
    return {"op": "call", "name": tool, "arguments": arguments}


def assert_no_secret_in(text: str) -> None:
    for kind, value in SECRETS.items():
        assert value not in text, f"the {kind} secret is in wrap's output"
        if kind == "private_key":
            assert value.splitlines()[1] not in text, "a line of the private key is in wrap's output"


def events_by_tool(server: Leaky) -> dict[str, dict]:
    """The inspected events by tool (or uri); each tool at most once per test here, but for
    the same `tools/list` event again when the client lists the tools again (the Python SDK
    does before calling a tool its cache does not hold)."""
    events = server.run.inspected()
    server.run.decisions()  # checks every event's envelope, inspected ones included
    by_tool: dict[str, dict] = {}
    for event in events:
        key = event.get("tool") or event.get("uri")
        if key in by_tool and event["method"] == "tools/list":
            assert event == by_tool[key], events
            continue
        assert key not in by_tool, events
        by_tool[key] = event
    return by_tool


def assert_event(event: dict, method: str, action: str, check: str | set[str], kinds: set[str] | None = None,
                 server: str = "leaky") -> None:
    assert event["method"] == method, event
    assert event["action"] == action, event
    assert event["findings_total"] == len(event["findings"]) >= 1, event
    assert {f["check"] for f in event["findings"]} == ({check} if isinstance(check, str) else check), event
    for finding in event["findings"]:
        assert set(finding) >= {"check", "kind", "rule", "pointer"}, finding
        assert finding["pointer"] == "" or finding["pointer"].startswith("/"), finding
    if kinds is not None:
        assert {f["kind"] for f in event["findings"]} == kinds, event
    assert event["server"] == server, event
    assert "session" in event, event


# --- mask, strip, hide; block, deny; flag -------------------------------------------------

ACTIVE = BASE + """\
inspect:
  secrets: mask
  injection: strip
  descriptions: hide
  oversize: pass
  max_bytes: 4096
"""

BLOCKING = BASE + """\
inspect:
  secrets: block
  injection: block
  descriptions: deny
  max_bytes: 4096
"""

FLAGGING = BASE + """\
inspect:
  secrets: flag
  injection: flag
  descriptions: flag
"""

STEPS = [{"op": "list"}, call("read_secret"), call("read_config"), call("read_doc"), call("read_mixed"), call("read_broken"),
         call("fetch", url="http://127.0.0.1:9/a"), call("poisoned", a=1, b=2), call("corpus", name="README.md")]


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
    assert structured == {"region": "eu-west-1", "github": "[REDACTED:github_token]",
                          "aws": "[REDACTED:aws_access_key_id]"}, structured
    assert json.loads(text) == structured
    assert seen.results["read_doc"] == (False, None, STRIPPED), seen.results["read_doc"]
    assert seen.results["read_mixed"] == (False, None, REDACTED_SECRET_TEXT + "\n" + STRIPPED)
    assert seen.results["read_broken"] == (True, None, BROKEN + REDACTED_SECRET_TEXT + "\n" + STRIPPED)  # an error result
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
    assert set(events) == {"read_secret", "read_config", "read_doc", "read_mixed", "read_broken", "poisoned", "corpus"}, events
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
        payload = json.loads(text[len(DENY_TEXT):])
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


@pytest.mark.xfail(strict=True, reason=(
    "a JSON-RPC error answer is relayed unread (docs/inspect.md, 'Where wrap looks': 'An error "
    "answer (error) has no result and is relayed as it is'), yet its message and data are the "
    "server's text and reach the model like a result: secrets and injections pass unmasked"))
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


# --- a response selector in a flow rule, across two servers of one client -----------------

RESPONSE_TRIGGER = BASE + """\
sequences:
  - type: never_after
    id: no-fetch-after-a-secret
    trigger: { tool: "*", response: secrets }
    forbidden: fetch
"""

URLS = ["http://127.0.0.1:9/before", "http://127.0.0.1:9/after-a-doc", "http://127.0.0.1:9/after-a-secret"]


def two_servers(tmp_path: Path, base_env: dict[str, str], policy: str) -> tuple[Leaky, Leaky]:
    return leaky_server(tmp_path, base_env, policy, label="a"), leaky_server(tmp_path, base_env, policy, label="b")


def assert_response_trigger(a: Leaky, b: Leaky, secret_text: str, denied: tuple[bool, object, str]) -> None:
    assert secret_text == leaky.secret_text()  # no inspect: relayed as it came
    is_error, structured, text = denied
    assert_denied("fetch", is_error, structured, text, "E_SEQUENCE_VIOLATION")
    assert json.loads(text[len(DENY_TEXT):])["rule"] == "no-fetch-after-a-secret"
    assert [c["url"] for c in b.calls()] == URLS[:2]  # server b never ran the third fetch
    event = events_by_tool(a)["read_secret"]
    assert {f["check"] for f in event["findings"]} == {"secrets"}, event
    assert event["server"] == "a"
    assert "read_doc" not in events_by_tool(a)  # the rule names secrets: an injection is not looked for
    session = a.run.decisions()[-1]["session"]
    assert session.startswith("client:") and b.run.decisions()[-1]["session"] == session
    assert_no_secret_in(a.logs_text())


async def test_response_trigger_python_sdk_two_servers(tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, RESPONSE_TRIGGER)
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(a, b) as (sa, sb):
            assert (await sb.call_tool("fetch", {"url": URLS[0]})).is_error is False
            assert (await sa.call_tool("read_doc", {})).is_error is False
            assert (await sb.call_tool("fetch", {"url": URLS[1]})).is_error is False
            secret = await sa.call_tool("read_secret", {})
            r = await sb.call_tool("fetch", {"url": URLS[2]})
    assert_response_trigger(a, b, text_of(secret), (r.is_error, r.structured_content, text_of(r)))
    await a.ended()
    await b.ended()


async def test_response_trigger_ts_v1_host_two_servers(node, tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, RESPONSE_TRIGGER)
    steps = [{"server": "b", "name": "fetch", "arguments": {"url": URLS[0]}},
             {"server": "a", "name": "read_doc", "arguments": {}},
             {"server": "b", "name": "fetch", "arguments": {"url": URLS[1]}},
             {"server": "a", "name": "read_secret", "arguments": {}},
             {"server": "b", "name": "fetch", "arguments": {"url": URLS[2]}}]
    lines = await ts_multi(node, {"a": a, "b": b}, steps, base_env, tmp_path)
    assert [x["is_error"] for x in lines[:3]] == [False, False, False], lines
    last = lines[4]
    assert_response_trigger(a, b, "".join(lines[3]["texts"]),
                            (last["is_error"], last["structuredContent"], "".join(last["texts"])))
    await a.ended()
    await b.ended()


# --- value taint across two servers -------------------------------------------------------

VALUE_TAINT = BASE + """\
inspect:
  secrets: flag
  arguments: { tainted: deny }
  tools:
    - { tool: read_doc, taint: true }
"""

TOKEN = SECRETS["github_token"]
DOC_RUN = leaky.INNOCENT_PARTS[0]  # 30 bytes of read_doc's answer
# (data sent through b's `send`, the source whose taint denies it or None)
SENDS: list[tuple[str, str | None]] = [
    (TOKEN, None),  # before anything came back: not tainted yet
    ("read_secret", "step"),
    (TOKEN, "a/read_secret"),
    (f"k={base64.b64encode(SECRETS['aws_access_key_id'].encode()).decode()}", "a/read_secret"),
    (SECRETS["stripe_key"].encode().hex(), "a/read_secret"),
    (f"https://127.0.0.1:9/?k={quote(SECRETS['private_key'])}", "a/read_secret"),  # URL-encoded
    ("hello, an unrelated message", None),
    ("read_doc", "step"),
    (f"quote: {DOC_RUN}", "a/read_doc"),
    ("still unrelated", None),
]


def assert_value_taint(a: Leaky, b: Leaky, results: list[tuple[bool, object, str]]) -> None:
    sends = [(data, source) for data, source in SENDS if source != "step"]
    assert len(results) == len(sends)
    for (data, source), (is_error, structured, text) in zip(sends, results, strict=True):
        if source is None:
            assert (is_error, text) == (False, "ok"), (data, text)
            continue
        assert_denied("send", is_error, structured, text, "E_TAINTED_ARGUMENT")
        reason = json.loads(text[len(DENY_TEXT):])["reason"]
        assert source in reason, (data, reason)
    assert [c["data"] for c in b.calls()] == [d for d, s in sends if s is None]
    assert_no_secret_in(a.logs_text() + "".join(
        p.read_text() for p in (b.run.decision_log, b.run.audit_log) if p.exists()))


async def test_value_taint_python_sdk_two_servers(tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, VALUE_TAINT)
    results = []
    with trio.fail_after(RUN_TIMEOUT):
        async with python_sessions(a, b) as (sa, sb):
            for data, source in SENDS:
                if source == "step":
                    assert (await sa.call_tool(data, {})).is_error is False
                    continue
                r = await sb.call_tool("send", {"data": data})
                results.append((r.is_error, r.structured_content, text_of(r)))
    assert_value_taint(a, b, results)
    await a.ended()
    await b.ended()


async def test_value_taint_ts_v1_host_two_servers(node, tmp_path, base_env):
    a, b = two_servers(tmp_path, base_env, VALUE_TAINT)
    steps = [{"server": "a", "name": data, "arguments": {}} if source == "step"
             else {"server": "b", "name": "send", "arguments": {"data": data}} for data, source in SENDS]
    lines = await ts_multi(node, {"a": a, "b": b}, steps, base_env, tmp_path)
    results = [(x["is_error"], x["structuredContent"], "".join(x["texts"])) for x in lines if x["server"] == "b"]
    assert_value_taint(a, b, results)
    await a.ended()
    await b.ended()


# --- resources and prompts -----------------------------------------------------------------

RESOURCES = BASE + """\
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
    denied = [f"{'resources/read' if op == 'read' else 'prompts/get'} {target}" for op, target, code, _ in cases if code]
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
    steps = [{"op": "read", "uri": t} if op == "read" else
             {"op": "prompt", "name": t, "arguments": {"topic": "tides"} if t == "summarize" else {}}
             for op, t, _code, _texts in cases]
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

EVERYTHING_FLAGGED = BASE + """\
inspect:
  secrets: flag
  injection: flag
  descriptions: flag
  arguments: { secrets: flag, tainted: flag }
"""


# docs/inspect.md documents each detector with examples written to be found (a GitHub token, a
# URL with a password, injected phrases): it is the positive control, the one entry that must
# make events (so zero events elsewhere means innocent, not unread).
CONTROL = "docs/inspect.md"


def corpus_names() -> list[str]:
    """Every docs page, the README, every source file of the package, and the generated hex
    digests, UUIDs and base64 PNG; the control last."""
    docs = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))
    sources = sorted(str(p.relative_to(REPO)) for p in (REPO / "assay").rglob("*.py"))
    return [*(d for d in docs if d != CONTROL), "README.md", *sources, "shas", "uuids", "png", CONTROL]


async def test_innocent_corpus_makes_no_finding(tmp_path, base_env):
    """With every check on, the project's own docs and code, hex digests, UUIDs and a base64 PNG
    make no `assay.response.inspected` event (a false positive would mask or block them).

    KNOWN FAILURE, suspected false positives of the secret detector (assay/inspect/secrets.py,
    docs/inspect.md "Kinds found in text"), seen when this test was written:
    - docs/wrap-records.md: `https://me:[REDACTED:url_password]@example.com`: the redaction
      marker itself is found as a `url_password` (so masked text is masked again, and a log
      read back through a tool is flagged);
    - assay/inspect/secrets.py: the placeholder `scheme://user:password@host` (a comment and
      the KINDS text) as `url_password`, and the prose "``Authorization: Bearer``)" as
      `authorization` (a scheme word followed by backquotes is taken for credentials).
    """
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
    assert {t.name for t in tools.tools} == TOOLS - {"poisoned"}
    assert texts["README.md"] == (REPO / "README.md").read_text()
    ids = [d["request_id"] for d in server.run.decisions()]
    assert len(ids) == len(names), ids
    name_of = dict(zip(ids, names, strict=True))
    findings = [(name_of.get(e.get("request_id"), e.get("tool")), e["findings"]) for e in server.run.inspected()]
    assert [name for name, _ in findings].count(CONTROL) == 1, findings
    innocent = [f"{name}: {f['check']}/{f['kind']} at {f['pointer']}" for name, fs in findings if name != CONTROL for f in fs]
    assert innocent == [], "findings on innocent content:\n" + "\n".join(innocent)
    await server.ended()
