"""A tiny HTTP forward proxy on loopback that records what reaches it, for the proxy tests of
`assay mcp wrap --url` (docs/remote.md, "Proxies").

    python remote_proxy.py --upstream 127.0.0.1:PORT

It binds 127.0.0.1 on a free port, listens, and prints `READY <port>`. Every request that
reaches it is printed as one line, `PROXIED <method> <target> auth=<yes|no>` (whether it
carried an `Authorization` header; never its value), before it is forwarded: a request in
absolute form (`POST http://host/path`, plain http through a proxy) goes to the upstream with
its target made a path (whatever host it named: the tests name hosts that do not exist), and a
`CONNECT` is tunnelled to the upstream as bytes. Responses are relayed as they come (event
streams too).
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

import trio

MAX_HEAD = 65536


async def _read_head(stream: trio.SocketStream, buf: bytearray) -> bytes | None:
    """One request head (up to the blank line), or None at the end of the connection."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            return None
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end])
    del buf[:end]
    return head


async def _read_body(stream: trio.SocketStream, buf: bytearray, length: int) -> bytes:
    while len(buf) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        buf += chunk
    body = bytes(buf[:length])
    del buf[:length]
    return body


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    try:
        while chunk := await source.receive_some(65536):
            await sink.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def handle(client: trio.SocketStream, upstream: tuple[str, int]) -> None:
    """One client connection; a connection the client resets or drops ends here, never the
    proxy (an HTTP client may reset a kept-alive connection it no longer needs)."""
    try:
        await _handle(client, upstream)
    except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):  # (raised in the nursery: a group)
        pass


async def _handle(client: trio.SocketStream, upstream: tuple[str, int]) -> None:
    buf = bytearray()
    try:
        server = await trio.open_tcp_stream(*upstream)
    except OSError:
        await client.aclose()
        return
    async with client, server, trio.open_nursery() as nursery:
        nursery.start_soon(_pipe, server, client)
        while True:
            head = await _read_head(client, buf)
            if head is None:
                break
            line, _, rest = head.partition(b"\r\n")
            method, target, version = line.decode("latin-1").split(" ", 2)
            fields = [f for f in rest.split(b"\r\n") if f]
            auth = any(f.lower().startswith(b"authorization:") for f in fields)
            print(f"PROXIED {method} {target} auth={'yes' if auth else 'no'}", flush=True)
            if method == "CONNECT":
                await client.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if buf:
                    await server.send_all(bytes(buf))
                await _pipe(client, server)
                break
            parts = urlsplit(target)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            length = next((int(f.split(b":", 1)[1]) for f in fields if f.lower().startswith(b"content-length:")), 0)
            body = await _read_body(client, buf, length)
            kept = [f for f in fields if not f.lower().startswith((b"proxy-", b"host:"))]
            host = f"host: {upstream[0]}:{upstream[1]}\r\n".encode()  # the server checks it (DNS rebinding)
            out = f"{method} {path} {version}\r\n".encode() + host + b"".join(f + b"\r\n" for f in kept)
            await server.send_all(out + b"\r\n" + body)
        nursery.cancel_scope.cancel()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True, help="host:port every request is forwarded to")
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(f"READY {listeners[0].socket.getsockname()[1]}", flush=True)
    await trio.serve_listeners(lambda stream: handle(stream, (host, int(port))), listeners)


if __name__ == "__main__":
    sys.exit(trio.run(main))
