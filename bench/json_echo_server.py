"""A JSON-parsing echo MCP stand-in for the relay benchmark: the "direct connection whose server
parses JSON" baseline.

Like echo_server.py it reads whole chunks and writes one batch of replies per chunk, but every
line is decoded with `json.loads` and every reply encoded with `json.dumps` (the standard
library), the least work a real Python MCP server does per call.
"""

import json
import os
import sys


def main() -> None:
    out = sys.stdout.buffer
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    loads = json.loads
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
            if not line.strip():
                continue
            try:
                msg = loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and "id" in msg:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "ok"}]}}
                replies.append(dumps(reply))
        if replies:
            out.write(("\n".join(replies) + "\n").encode())
            out.flush()


if __name__ == "__main__":
    main()
