"""A real `mcp` SDK client session against the installed server: initialize, list the tools,
call each one (docs/server.md, "Protocol" and "Tools")."""

from __future__ import annotations

import json

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from assay import __version__
from tests.conftest import SERVER


async def test_sdk_session_initialize_list_and_call_every_tool(policy_root, base_env):
    params = StdioServerParameters(command=str(SERVER), args=["--policy-root", str(policy_root)], env=base_env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "assay-mcp-server"
            assert init.server_info.version == __version__
            assert await session.send_ping() is not None  # ping is answered (docs/server.md, "Protocol")

            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            assert names[-1] == "assay_server_identity" and len(names) == 6

            async def payload(name, arguments):
                result = await session.call_tool(name, arguments)
                assert len(result.content) == 1
                return result.is_error, json.loads(result.content[0].text)

            assert await payload("assay_server_identity", {}) == (
                False,
                {"name": "assay-mcp-server", "version": __version__},
            )
            assert await payload("assay_policy_decide", {"tool": "safe", "policy": "blocklist_policy.yaml"}) == (
                False,
                {"allowed": True, "reason": "Allowed by policy"},
            )
            err, p = await payload(
                "assay_check_args", {"tool": "strict_tool", "arguments": {"code": 1}, "policy": "strict_policy.yaml"}
            )
            assert (err, p) == (False, {"allowed": True, "violations": [], "suggested_fix": None})
            err, p = await payload(
                "assay_check_sequence", {"history": ["Search"], "next_tool": "Create", "policy": "sequence.yaml"}
            )
            assert (err, p["allowed"]) == (False, True)
            err, p = await payload(
                "assay_check_coverage",
                {"policy": "seq_full.yaml", "traces": [{"tools": ["Search", "Create"]}], "format": "markdown"},
            )
            assert err is False and p["content"].startswith("## Coverage Report")
            err, p = await payload(
                "assay_explain_trace",
                {"policy": "seq_full.yaml", "trace": [{"tool": "Create"}], "format": "markdown"},
            )
            assert err is False and p["text"].startswith("## Trace Explanation") and p["blocked_steps"] == 1
