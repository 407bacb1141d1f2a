"""The HTTP stack alone, for bench/bench_serve.py's floor figure: hypercorn on trio, configured
as ``assay mcp serve`` configures it (no access log, no server header, the response's head
written with its body: assay.shells.serve.heads), serving an ASGI app that
reads a POST's body and answers a fixed JSON-RPC result with its Content-Length: no
authentication, no policy, no upstream. Just enough MCP for an SDK's client to connect too (the
answer carries the request's id; ``initialize`` and ``tools/list`` get their results; a notification 202;
a GET, the SDK's event stream, 405). Prints ``listening <port>`` once it listens.

    python bench/hypercorn_floor.py
"""

import json
import sys

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from assay.shells.serve.heads import hold_heads

RESULT = {"content": [{"type": "text", "text": "ok"}]}
LISTED = {"tools": [{"name": "search", "inputSchema": {"type": "object"}}]}
INITIALIZED = {"capabilities": {"tools": {}}, "serverInfo": {"name": "floor", "version": "1"}}


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        got = await receive()
        body += got.get("body", b"")
        if not got.get("more_body"):
            break
    message = json.loads(body) if scope["method"] == "POST" else {}
    if "id" not in message:  # a notification, or a GET or DELETE
        status = 202 if scope["method"] == "POST" else 405
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    result = RESULT
    if message.get("method") == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], **INITIALIZED}
    elif message.get("method") == "tools/list":
        result = LISTED
    answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer, "more_body": False})


async def main():
    hold_heads()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.include_server_header = False
    config.keep_alive_timeout = 30
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve(app, config, task_status=task_status, mode="asgi"))
        print("listening", binds[0].rsplit(":", 1)[1], flush=True)


if __name__ == "__main__":
    sys.exit(trio.run(main))
