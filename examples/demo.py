"""The README's main job: `assay mcp wrap` enforcing examples/assay.yaml on a real MCP server.

An MCP client (the official `mcp` Python SDK) talks to `assay mcp wrap`, which runs the demo
server (examples/demo_server.py). We list the tools, make allowed and denied calls, and print
the decision log wrap wrote. Then the same with flow rules (examples/flows.yaml on two servers,
each behind its own wrap, started by this one client: one agent session): calls allowed or
denied by the calls before them, whichever server they went to. Last, approvals
(examples/approvals.yaml): wrap asks the person through the client before each deploy, and the
client's elicitation callback stands in for them, accepting the first and declining the second.
Run it with `./dev demo`.

The demo prints its own table only: what wrap writes on stderr goes to a file (the SDK's
``errlog``), printed only if the demo fails.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TextIO

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent


def _text(result) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    return " ".join(p for p in parts if p).strip()


PART_1 = [
    ("demo", "read_file", {"path": "/workspace/README.md"}),
    ("demo", "list_dir", {"path": "/workspace"}),
    ("demo", "read_file", {"path": "/etc/passwd"}),
    ("demo", "read_file", {"path": "/workspace/../etc/passwd"}),
    ("demo", "exec", {"command": "rm -rf /"}),
    ("demo", "write_file", {"path": "/workspace/x", "content": "y"}),
]

# Flow rules: the same call is allowed or denied by what came before it in the agent's session,
# whichever server it went to: a secret read through the vault server forbids a send through the
# ops server (both wraps are started by this one client process: one shared session).
PART_2 = [
    ("ops", "deploy", {"target": "prod"}),
    ("ops", "run_tests", {}),
    ("ops", "deploy", {"target": "prod"}),
    ("ops", "send_email", {"to": "ops@example.com", "body": "deployed"}),
    ("vault", "read_secret", {"name": "api_key"}),
    ("ops", "send_email", {"to": "ops@example.com", "body": "the token is ..."}),
    ("ops", "http_post", {"url": "https://example.com/paste", "body": "..."}),
]

# Approvals: wrap holds each deploy and asks the person through the client (elicitation).
PART_3 = [
    ("ops", "run_tests", {}),
    ("ops", "deploy", {"target": "staging"}),
    ("ops", "deploy", {"target": "prod"}),
]
ANSWERS = ["accept", "decline"]  # what the stand-in person answers, in order


async def main() -> int:
    assay = shutil.which("assay") or str(Path(sys.executable).parent / "assay")
    with tempfile.TemporaryDirectory(prefix="assay-demo-") as workdir:
        work = Path(workdir)
        errlog_path = work / "wrap-stderr.log"
        with open(errlog_path, "w", encoding="utf-8") as errlog:
            try:
                await _demo(assay, "assay.yaml", {"demo": "demo_server.py"}, PART_1, work / "decisions.ndjson",
                            work / "s1", errlog)
                print("\n" + "-" * 72 + "\n")
                await _demo(assay, "flows.yaml", {"vault": "flows_server.py", "ops": "flows_server.py"}, PART_2,
                            work / "flows.ndjson", work / "s2", errlog)
                print("\n" + "-" * 72 + "\n")
                await _demo(assay, "approvals.yaml", {"ops": "flows_server.py"}, PART_3, work / "approvals.ndjson",
                            work / "s3", errlog, answers=list(ANSWERS))
            except BaseException:
                errlog.flush()
                sys.stdout.flush()
                sys.stderr.write("demo failed; what assay mcp wrap wrote on stderr:\n")
                sys.stderr.write(errlog_path.read_text(encoding="utf-8", errors="replace"))
                raise
    return 0


def _person(answers: list[str]):
    """An elicitation callback standing in for the person: it shows what wrap asks and answers
    the next of ``answers``. Having one makes the client declare the elicitation capability."""
    from mcp import types

    async def elicit(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
        answer = answers.pop(0)
        question = " ".join(params.message.split())
        print(f"  ASKED    {question[:120]}{'...' if len(question) > 120 else ''}")
        print(f"           the person answers: {answer}")
        return types.ElicitResult(action=answer, content={} if answer == "accept" else None)

    return elicit


async def _demo(assay: str, policy: str, servers: dict[str, str], calls: list, decision_log: Path, state: Path,
                errlog: TextIO, answers: list[str] | None = None) -> None:
    """One part: a wrap per server (``label -> server script``), all started by this process
    (one agent session, kept in the part's own state directory), and the calls in order.
    Each wrap's stderr goes to ``errlog``."""
    env = {**os.environ, "ASSAY_STATE_DIR": str(state)}
    for label, server in servers.items():
        print(f"$ assay mcp wrap --policy examples/{policy} --label {label} ... -- python examples/{server}")
    print()
    async with AsyncExitStack() as stack:
        sessions = {}
        for label, server in servers.items():
            params = StdioServerParameters(
                command=assay,
                args=[
                    "mcp", "wrap",
                    "--policy", str(HERE / policy),
                    "--label", label,
                    "--event-source", "assay://demo/app",
                    "--decision-log", str(decision_log),
                    "--", sys.executable, str(HERE / server),
                ],
                env=env,
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            callback = {} if answers is None else {"elicitation_callback": _person(answers)}
            session = await stack.enter_async_context(ClientSession(read, write, **callback))
            await session.initialize()
            tools = await session.list_tools()
            print(f"tools offered by {label}:", ", ".join(t.name for t in tools.tools))
            sessions[label] = session
        for label, name, args in calls:
            result = await sessions[label].call_tool(name, args)
            verdict = "DENIED " if result.is_error else "ALLOWED"
            detail = _text(result)  # a deny's text holds the deny payload
            print(f"  {verdict}  {label}: {name}({json.dumps(args)}) -> {detail}")
    print("\ndecision log (--decision-log):")
    for line in decision_log.read_text().splitlines():
        event = json.loads(line)
        if event["type"] != "assay.tool.decision":
            continue  # the log also holds the tools each server listed (docs/wrap-records.md, "Tools seen")
        data = event["data"]
        rule = data.get("matched_rule") or ""
        approval = f"approval {data['approval_state']}" if data.get("approval_state") else ""
        print(f"  {data['decision']:5}  {data['server']:6} {data['tool']:11}  {data['reason_code']:20}  {rule:24}  "
              f"{approval or data.get('reason', '')}")


if __name__ == "__main__":
    sys.exit(trio.run(main))
