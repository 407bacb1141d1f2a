"""A fast line-echo MCP stand-in for the relay benchmark: answers each request with its id.

It reads whole chunks and writes one batch of replies per chunk, so the server itself is not
what the benchmark measures. :func:`serve` is that loop; json_echo_server.py uses it too.
"""

import os
import re
import sys
from collections.abc import Callable

ID = re.compile(rb'"id":\s*(-?\d+|"[^"]*")')


def serve(replies_for: Callable[[list[bytes]], list[bytes]]) -> None:
    """Read stdin in chunks; for each chunk's whole lines write ``replies_for(lines)`` at once."""
    out = sys.stdout.buffer
    tail = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        data = tail + chunk
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        replies = replies_for(data[:cut].split(b"\n"))
        if replies:
            out.write(b"".join(replies))
            out.flush()


def regex_replies(lines: list[bytes]) -> list[bytes]:
    replies = []
    for line in lines:
        m = ID.search(line)
        if m:
            replies.append(
                b'{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}\n' % m.group(1)
            )
    return replies


if __name__ == "__main__":
    serve(regex_replies)
