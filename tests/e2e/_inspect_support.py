"""What the response inspection tests share (tests/e2e/test_e2e_inspect.py and
test_e2e_inspect_session.py; docs/policy.md, "Inspecting what comes back"): the leaky server
(tests/e2e/leaky_server.py) under `assay mcp wrap`, the Python SDK and TypeScript SDK v1 clients
that drive it, and the checks of the `assay.response.inspected` events.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import leaky_server as leaky
from _e2e_support import E2E, REPO, RUN_TIMEOUT, WrapRun, assert_all_ended

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
TOOLS = {
    "read_secret",
    "read_config",
    "read_doc",
    "read_mixed",
    "read_broken",
    "read_rpc_error",
    "poisoned",
    "fetch",
    "send",
    "corpus",
}
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


def leaky_server(
    tmp_path: Path,
    base_env: dict[str, str],
    policy: str,
    label: str = "leaky",
    innocent: bool = False,
    dry_run: bool = False,
) -> Leaky:
    home = tmp_path / label
    home.mkdir()
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir(exist_ok=True)
    outside.mkdir(exist_ok=True)
    policy_file = home / "assay.yaml"
    policy_file.write_text(policy.replace("ALLOWED", str(allowed)))
    run = WrapRun(home, policy_file, [sys.executable, str(LEAKY)], label=label, dry_run=dry_run)
    calls = home / "calls.ndjson"
    env = {
        **base_env,
        "LEAKY_CALLS": str(calls),
        "LEAKY_ROOT": str(REPO),
        "LEAKY_ALLOWED": str(allowed),
        "LEAKY_OUTSIDE": str(outside),
        "LEAKY_INNOCENT": "1" if innocent else "0",
    }
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
    spec = {
        "command": server.run.argv[0],
        "args": server.run.argv[1:],
        "steps": steps,
        "timeoutMs": int(RUN_TIMEOUT * 1000),
    }
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_V1_CLIENT)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(E2E),
            env=server.env,
        )
    server.run.stderr.write_bytes(proc.stderr)
    out = proc.stdout.decode()
    assert proc.returncode == 0, (
        f"ts_v1_client exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{server.run.stderr_text()}"
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines][0] == "connected" and lines[-1]["kind"] == "closed", out
    assert lines[-1]["errors"] == [], lines[-1]
    assert len(lines) == len(steps) + 2, out
    return lines[1:-1]


async def ts_multi(
    node: str, servers: dict[str, Leaky], steps: list[dict], env: dict[str, str], cwd: Path
) -> list[dict]:
    """Run ts_v1_multi_client.mjs (one host process, one Client per server)."""
    spec = {
        "servers": {
            name: {"command": s.run.argv[0], "args": s.run.argv[1:], "env": s.env} for name, s in servers.items()
        },
        "timeoutMs": int(RUN_TIMEOUT * 1000),
        "steps": steps,
    }
    with trio.fail_after(RUN_TIMEOUT + 30):
        proc = await trio.run_process(
            [node, str(TS_V1_MULTI)],
            stdin=json.dumps(spec).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(cwd),
            env=env,
        )
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr.decode(errors='replace')}"
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["kind"] for x in lines] == ["connected"] * len(servers) + [s.get("op", "call") for s in steps] + [
        "closed"
    ], out
    assert lines[-1]["errors"] == [], lines[-1]
    return lines[len(servers) : -1]


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


def assert_event(
    event: dict, method: str, action: str, check: str | set[str], kinds: set[str] | None = None, server: str = "leaky"
) -> None:
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
