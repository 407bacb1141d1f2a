"""A real MCP server (the `mcp` SDK's MCPServer, FastMCP's successor) with one trivial tool,
``echo``, for bench_remote.py.

    python bench/http_echo_server.py [--sse] [--stateless] [--hypercorn] [--nagle]
    python bench/http_echo_server.py --stdio   # the same server over stdio

Over HTTP (Streamable HTTP on 127.0.0.1, a free port) it binds 127.0.0.1:0 itself, listens, and
only then prints ``PORT <n>`` on stdout, so the benchmark reads the port and connects at once
(connections queue until the server accepts them): no polling, no race on a port picked by
someone else. Answers are single JSON bodies (``json_response``) unless ``--sse``, where each
POST is answered with an SSE stream; with sessions unless ``--stateless``.

It is served by uvicorn as ``MCPServer.run("streamable-http")`` serves it (asyncio sets
``TCP_NODELAY`` on each connection, since the socket says it is TCP), or by hypercorn with
``--hypercorn`` (which sets ``TCP_NODELAY`` on the sockets it binds; here on ours). ``--nagle``
leaves Nagle's algorithm on instead (a socket made without ``IPPROTO_TCP``, as when uvicorn or
hypercorn are handed one): each answer's body then waits for the client's acknowledgement of its
head (docs/remote.md, "Connections").
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


async def serve_http(args: argparse.Namespace) -> None:
    app = server.streamable_http_app(json_response=not args.sse, stateless_http=args.stateless, host="127.0.0.1")
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP; 0 with --nagle
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0 if args.nagle else socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.hypercorn and not args.nagle:  # what hypercorn does to the sockets it binds itself
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    if args.hypercorn:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"fd://{sock.fileno()}"]
        config.backlog = 1024
        config.loglevel = "WARNING"
        await serve(app, config)  # type: ignore[arg-type]
        return
    import uvicorn

    uv = uvicorn.Config(app, log_level="warning", access_log=False, backlog=1024)
    await uvicorn.Server(uv).serve(sockets=[sock])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sse", action="store_true", help="answer each POST with an SSE stream")
    ap.add_argument("--stateless", action="store_true", help="no sessions (stateless_http)")
    ap.add_argument("--hypercorn", action="store_true", help="served by hypercorn instead of uvicorn")
    ap.add_argument("--nagle", action="store_true", help="leave Nagle's algorithm on for the connections")
    ap.add_argument("--stdio", action="store_true", help="serve over stdio instead")
    args = ap.parse_args()
    if args.stdio:
        server.run()
        return
    try:
        anyio.run(serve_http, args)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
