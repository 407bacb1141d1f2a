"""A fast stdio MCP server for bench/bench_serve.py: answers initialize, tools/list (one tool,
``search``, with a schema) and tools/call (``ok``) at once, reading whole chunks like
echo_server.py; notifications are read and ignored."""

import json
import os
import sys

TOOLS = {
    "tools": [
        {
            "name": "search",
            "description": "search the notes",
            "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
        {"name": "read_file", "description": "read a file", "inputSchema": {"type": "object"}},
        {"name": "send_mail", "description": "send a mail", "inputSchema": {"type": "object"}},
    ]
}


def reply(msg):
    method, rid = msg.get("method"), msg.get("id")
    if rid is None or method is None:
        return None
    if method == "initialize":
        version = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fast", "version": "1"},
        }
    elif method == "tools/list":
        result = TOOLS
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ok"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def main():
    tail = b""
    out = sys.stdout.buffer
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return
        data = tail + chunk
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        answers = []
        for line in data[:cut].split(b"\n"):
            if line.strip():
                got = reply(json.loads(line))
                if got is not None:
                    answers.append(json.dumps(got).encode() + b"\n")
        if answers:
            out.write(b"".join(answers))
            out.flush()


if __name__ == "__main__":
    main()
