"""Helpers for the end-to-end tests: real official MCP clients and servers talking through
`assay mcp wrap` (issue 4; docs/wrap.md, docs/wrap-records.md).

Every wrap run here is started through `/bin/sh -c 'echo $$ >> PIDFILE && exec ...'`, for wrap and
for the wrapped server alike, so each process appends its own pid before it becomes the real
program (same pid after `exec`). The tests then know exactly which processes a run started
(including the TypeScript client's disposable probe run) and can prove they all ended: each pid
is waited on through a pidfd (an event, not a sleep).
"""

from __future__ import annotations

import json
import os
import select
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

E2E = Path(__file__).resolve().parent
REPO = E2E.parent.parent
ASSAY = Path(sys.executable).parent / "assay"
NODE_MODULES = E2E / "node_modules"
TS_CLIENT = E2E / "ts_client.mjs"
TS_MODERN_SERVER = E2E / "ts_modern_server.mjs"
EVERYTHING_SERVER = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
DEMO_SERVER = REPO / "examples" / "demo_server.py"
DEMO_POLICY = REPO / "examples" / "assay.yaml"
EVENT_SOURCE = "assay://assay-e2e/tests"
MODERN = "2026-07-28"

# Generous: machines are slow and shared. A run normally takes 2-6 s.
RUN_TIMEOUT = 120.0
EXIT_TIMEOUT = 30.0


def recorded(pidfile: Path, argv: list[str]) -> list[str]:
    """`argv`, started through a shell that appends its pid to `pidfile` and then execs `argv`."""
    return ["/bin/sh", "-c", 'echo $$ >> "$0" && exec "$@"', str(pidfile), *argv]


# The event types of the decision log and the prefix of each one's id.
EVENT_ID_PREFIX = {
    "assay.tool.decision": "evt_decision_",
    "assay.tool.listed": "evt_tool_listed_",
    "assay.response.inspected": "evt_inspected_",
    "assay.client.capabilities": "evt_client_",
}


@dataclass
class WrapRun:
    """One `assay mcp wrap` set-up: its command line and the files it leaves behind."""

    tmp: Path
    policy: Path
    server: list[str]
    dry_run: bool = False
    label: str = "e2e-server"
    extra: list[str] = field(default_factory=list)  # more wrap options (e.g. one-run outputs)
    decision_log: Path = field(init=False)
    audit_log: Path = field(init=False)
    wrap_pids: Path = field(init=False)
    server_pids: Path = field(init=False)
    stderr: Path = field(init=False)

    def __post_init__(self) -> None:
        self.decision_log = self.tmp / "decisions.ndjson"
        self.audit_log = self.tmp / "audit.ndjson"
        self.wrap_pids = self.tmp / "wrap.pids"
        self.server_pids = self.tmp / "server.pids"
        self.stderr = self.tmp / "wrap.stderr"

    def wrap_options(self) -> list[str]:
        """``assay mcp wrap`` and the options every e2e run gives it, ``extra`` last."""
        return [
            str(ASSAY),
            "mcp",
            "wrap",
            "--policy",
            str(self.policy),
            "--event-source",
            EVENT_SOURCE,
            "--decision-log",
            str(self.decision_log),
            "--audit-log",
            str(self.audit_log),
            "--label",
            self.label,
            "--verbose",
            *(["--dry-run"] if self.dry_run else []),
            *self.extra,
        ]

    @property
    def argv(self) -> list[str]:
        """The client's command: wrap (pid recorded) around the server (pid recorded)."""
        return recorded(self.wrap_pids, [*self.wrap_options(), "--", *recorded(self.server_pids, self.server)])

    def decisions(self) -> list[dict]:
        """The `data` of every decision event, after checking the CloudEvents envelope
        (docs/wrap-records.md, "Decision event"). The log also holds an `assay.tool.listed`
        event per newly listed tool (docs/wrap-records.md, "Tools seen"): see :meth:`listed`,
        and an `assay.response.inspected` event per answer with findings (docs/policy.md,
        "Inspecting what comes back"): see :meth:`inspected`."""
        events = _ndjson(self.decision_log)
        for event in events:
            assert event["specversion"] == "1.0"
            assert event["type"] in EVENT_ID_PREFIX, event
            assert event["source"] == EVENT_SOURCE
            assert event["id"].startswith(EVENT_ID_PREFIX[event["type"]]), event
            assert "datacontenttype" not in event
        return [event["data"] for event in events if event["type"] == "assay.tool.decision"]

    def listed(self) -> list[dict]:
        """The `data` of every `assay.tool.listed` event of the decision log."""
        return [e["data"] for e in _ndjson(self.decision_log) if e["type"] == "assay.tool.listed"]

    def clients(self) -> list[dict]:
        """The `data` of every `assay.client.capabilities` event of the decision log (what the
        client declared: docs/wrap-records.md, "The client")."""
        return [e["data"] for e in _ndjson(self.decision_log) if e["type"] == "assay.client.capabilities"]

    def inspected(self) -> list[dict]:
        """The `data` of every `assay.response.inspected` event of the decision log."""
        return [e["data"] for e in _ndjson(self.decision_log) if e["type"] == "assay.response.inspected"]

    def audits(self) -> list[dict]:
        return _ndjson(self.audit_log)

    def pids(self) -> tuple[list[int], list[int]]:
        """(wrap pids, server pids), in start order."""
        return _pids(self.wrap_pids), _pids(self.server_pids)

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""


def _ndjson(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        state = next((ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:")), "")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} [{state}] {cmd}"


async def assert_all_ended(pids: list[int], timeout: float = EXIT_TIMEOUT) -> None:
    """Wait (on pidfds, no polling) until every pid has exited; fail naming any that did not."""
    pending = []
    for pid in pids:
        try:
            pending.append((pid, os.pidfd_open(pid)))
        except ProcessLookupError:
            continue
    try:
        with trio.move_on_after(timeout):
            for _pid, fd in pending:
                await trio.lowlevel.wait_readable(fd)
            return
        alive = [pid for pid, fd in pending if not _exited(fd)]
        pytest.fail(
            f"processes still alive {timeout:.0f}s after the client finished: " + "; ".join(_describe(p) for p in alive)
        )
    finally:
        for _pid, fd in pending:
            os.close(fd)


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


async def run_ts_client(node: str, run: WrapRun, calls: list[dict], env: dict[str, str]) -> dict:
    """Run tests/e2e/ts_client.mjs against `run`; return {"connected": ..., "calls": [...]}."""
    spec = {"command": run.argv[0], "args": run.argv[1:], "calls": calls, "timeoutMs": int(RUN_TIMEOUT * 1000)}
    with trio.fail_after(RUN_TIMEOUT + 30):
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
    assert proc.returncode == 0, f"ts_client exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{run.stderr_text()}"
    lines = [json.loads(line) for line in out.splitlines()]
    kinds = [line["kind"] for line in lines]
    assert kinds == ["connected"] + ["call"] * len(calls) + ["closed"], out
    return {"connected": lines[0], "calls": lines[1:-1]}


@dataclass(frozen=True)
class Call:
    """One tools/call and what the policy must make of it (`code` None = allowed)."""

    name: str
    arguments: dict
    code: str | None = None


# policy code -> decision-log reason_code (docs/wrap-records.md, "Which calls produce records").
REASON_CODE = {
    None: "P_POLICY_ALLOW",
    "E_TOOL_DENIED": "P_TOOL_DENIED",
    "E_TOOL_NOT_ALLOWED": "P_TOOL_NOT_ALLOWED",
    "E_ARG_SCHEMA": "P_ARG_SCHEMA",
    "E_TOOL_DRIFT": "P_TOOL_DRIFT",
    "E_PATH_CONFINEMENT": "P_POLICY_DENY",
}

# examples/assay.yaml against examples/demo_server.py (and tests/e2e/ts_modern_server.mjs, which
# offers the same read_file/list_dir/exec tools).
DEMO_CALLS = [
    Call("read_file", {"path": "/workspace/README.md"}),
    Call("list_dir", {"path": "/workspace"}),
    Call("read_file", {"path": "/etc/passwd"}, "E_PATH_CONFINEMENT"),
    Call("exec", {"command": "rm -rf /"}, "E_TOOL_DENIED"),
    Call("write_file", {"path": "/workspace/x", "content": "y"}, "E_TOOL_NOT_ALLOWED"),
]


def assert_denied(name: str, is_error: bool, structured: object, text: str, code: str) -> None:
    """A deny as the client sees it (docs/wrap.md, "Deny replies"): a CallToolResult with
    isError, not an error; its text is "Content blocked by policy" followed by the deny payload
    as JSON; structuredContent is that payload, or absent for a tool with an outputSchema."""
    assert is_error is True, (name, structured, text)
    assert text.startswith(DENY_TEXT), text
    payload = json.loads(text[len(DENY_TEXT) :])
    assert payload["status"] == "deny"
    assert payload["error_code"] == code, payload
    if code != "E_RATE_LIMIT":
        assert payload["tool"] == name
    assert structured is None or structured == payload, (structured, payload)


DENY_TEXT = "Content blocked by policy"


def assert_logs(run: WrapRun, calls: list[Call]) -> None:
    """Decision log and audit log hold exactly one record per call, in order (docs/wrap-records.md).

    Only tools/call is evaluated (docs/wrap.md, "Enforcement"), so initialize, tools/list and
    server/discover leave no record. Dry-run keeps the policy result in reason_code/typed_decision
    but says `allow`; only the audit log says `would_deny`.
    """
    decisions, audits = run.decisions(), run.audits()
    assert [d["tool"] for d in decisions] == [c.name for c in calls], decisions
    assert [a["tool"] for a in audits] == [c.name for c in calls], audits
    ids = [d.get("request_id") for d in decisions]
    assert all(isinstance(i, int) and not isinstance(i, bool) for i in ids), ids
    assert ids == sorted(set(ids)), f"request ids must be unique and in call order: {ids}"
    for call, d, a in zip(calls, decisions, audits, strict=True):
        denied = call.code is not None
        assert d["reason_code"] == REASON_CODE[call.code], d
        typed = "allow" if not denied else "deny_with_alert" if call.code == "E_TOOL_DRIFT" else "deny"
        assert d["typed_decision"] == typed, d
        assert d["decision"] == ("deny" if denied and not run.dry_run else "allow"), d
        assert d["tool_call_id"] == f"req_{d['request_id']}"
        assert d["policy_deny"] is (denied and not run.dry_run)
        assert a["request_id"] == d["request_id"]
        if denied:
            assert a["decision"] == ("would_deny" if run.dry_run else "deny"), a
            assert a["agentic"]["status"] == "deny" and a["agentic"]["error_code"] == call.code, a
            assert a["reason"] == d["reason"], (a, d)
        else:
            assert a["decision"] == "allow" and a["reason"] is None and "agentic" not in a, a
