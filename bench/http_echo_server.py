"""A real MCP server (the `mcp` SDK's MCPServer, FastMCP's successor) with one trivial tool,
``echo``, for bench_remote.py.

    python bench/http_echo_server.py [--sse]   # Streamable HTTP on 127.0.0.1, a free port
    python bench/http_echo_server.py --stdio   # the same server over stdio

Over HTTP it binds 127.0.0.1:0 itself, listens, and only then prints ``PORT <n>`` on stdout,
so the benchmark reads the port and connects at once (connections queue until uvicorn accepts
them): no polling, no race on a port picked by someone else. Answers are single JSON bodies
(``json_response``) unless ``--sse``, where each POST is answered with an SSE stream.
"""

from __future__ import annotations

import argparse
import socket
import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-echo", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


async def serve_http(sse: bool) -> None:
    import uvicorn

    app = server.streamable_http_app(json_response=not sse, host="127.0.0.1")
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP
    # (with 0, each answer waits ~40 ms for the client's delayed ACK between head and body)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, backlog=1024)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sse", action="store_true", help="answer each POST with an SSE stream")
    ap.add_argument("--stdio", action="store_true", help="serve over stdio instead")
    args = ap.parse_args()
    if args.stdio:
        server.run()
        return
    try:
        anyio.run(serve_http, args.sse)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
