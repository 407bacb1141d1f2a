"""`assay_server_identity`: which server build answers (docs/server.md, "assay_server_identity").

Reads no file and takes no decision, so it always runs inline and never waits behind a worker.
The payload is the very serverInfo that `initialize` returns, built by the one function in
:mod:`assay.server.info`.
"""

from __future__ import annotations

from typing import Any

from assay.server.context import ToolContext
from assay.server.info import server_info
from assay.server.toolbase import Tool

NAME = "assay_server_identity"
REFUSAL = {"error": {"code": "E_INVALID_ARGS", "message": "assay_server_identity takes no arguments"}}


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    if arguments is None or arguments == {}:
        return server_info()
    # Any argument at all (on_error included) is refused; it is never echoed and there is no
    # `allowed` member, since no policy decision was taken.
    return {"error": dict(REFUSAL["error"])}


TOOL = Tool(
    name=NAME,
    description=(
        "Report which assay-mcp-server build answers this session: the same name and version "
        "that initialize returns as serverInfo. Takes no arguments and reads no policy."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    run=run,
    takes_decision=False,
    inline=True,
)
