"""A fast line-echo MCP stand-in for the relay benchmark: answers each request with its id.

It reads whole chunks and writes one batch of replies per chunk, so the server itself is not
what the benchmark measures.
"""

import os
import re
import sys

ID = re.compile(rb'"id":\s*(-?\d+|"[^"]*")')


def main() -> None:
    out = sys.stdout.buffer
    tail = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        data = tail + chunk
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        replies = []
        for line in data[:cut].split(b"\n"):
            m = ID.search(line)
            if m:
                replies.append(b'{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}\n' % m.group(1))
        if replies:
            out.write(b"".join(replies))
            out.flush()


if __name__ == "__main__":
    main()
