"""The HTTP stack alone, for bench/bench_serve.py's floor figure: hypercorn on trio, configured
as ``assay mcp serve`` configures it (no access log, no server header, the response's head
written with its body: assay.shells.serve.heads), serving an ASGI app that
reads a POST's body and answers a fixed JSON-RPC result with its Content-Length: no
authentication, no policy, no upstream. Prints ``listening <port>`` once it listens.

    python bench/hypercorn_floor.py
"""

import json
import sys

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from assay.shells.serve.heads import hold_heads

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "ok"}]}}).encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))]


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY, "more_body": False})


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
