"""A JSON-parsing echo MCP stand-in for the relay benchmark: the "direct connection whose server
parses JSON" baseline.

Like echo_server.py (whose chunk loop it uses) it writes one batch of replies per chunk, but
every line is decoded with `json.loads` and every reply encoded with `json.dumps` (the standard
library), the least work a real Python MCP server does per call.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from echo_server import serve  # noqa: E402

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def json_replies(lines: list[bytes]) -> list[bytes]:
    replies = []
    for line in lines:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and "id" in msg:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "ok"}]}}
            replies.append((_dumps(reply) + "\n").encode())
    return replies


if __name__ == "__main__":
    serve(json_replies)
