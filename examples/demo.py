"""The README's main job: `assay mcp wrap` enforcing examples/assay.yaml on a real MCP server.

An MCP client (the official `mcp` Python SDK) talks to `assay mcp wrap`, which runs the demo
server (examples/demo_server.py). We list the tools, make allowed and denied calls, and print
the decision log wrap wrote. Run it with `./dev demo`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent


def _text(result) -> str:
    parts = [getattr(block, "text", "") for block in result.content]
    return " ".join(p for p in parts if p).strip()


async def main() -> int:
    assay = shutil.which("assay") or str(Path(sys.executable).parent / "assay")
    with tempfile.TemporaryDirectory(prefix="assay-demo-") as workdir:
        return await _demo(assay, Path(workdir) / "decisions.ndjson")


async def _demo(assay: str, decision_log: Path) -> int:
    params = StdioServerParameters(
        command=assay,
        args=[
            "mcp", "wrap",
            "--policy", str(HERE / "assay.yaml"),
            "--event-source", "assay://demo/app",
            "--decision-log", str(decision_log),
            "--verbose",
            "--", sys.executable, str(HERE / "demo_server.py"),
        ],
        env=dict(os.environ),
    )
    print("$ assay mcp wrap --policy examples/assay.yaml ... -- python examples/demo_server.py\n")
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            print("tools offered by the server:", ", ".join(t.name for t in tools.tools))
            calls = [
                ("read_file", {"path": "/workspace/README.md"}),
                ("list_dir", {"path": "/workspace"}),
                ("read_file", {"path": "/etc/passwd"}),
                ("read_file", {"path": "/workspace/../etc/passwd"}),
                ("exec", {"command": "rm -rf /"}),
                ("write_file", {"path": "/workspace/x", "content": "y"}),
            ]
            for name, args in calls:
                result = await session.call_tool(name, args)
                verdict = "DENIED " if result.is_error else "ALLOWED"
                detail = _text(result)
                if result.is_error and result.structured_content:
                    detail += "  " + json.dumps(result.structured_content)
                print(f"  {verdict}  {name}({json.dumps(args)}) -> {detail}")
    print("\ndecision log (--decision-log):")
    for line in decision_log.read_text().splitlines():
        data = json.loads(line)["data"]
        print(f"  {data['decision']:5}  {data['tool']:10}  {data['reason_code']:20}  {data.get('reason', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
