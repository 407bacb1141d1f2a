"""A small MCP server over stdio for the gateway's tests (docs/serve.md, "Upstreams and the
agent session of a user"): newline-delimited JSON-RPC, no SDK (it starts at once).

Tools: ``pid`` (this process's pid), ``read_secret`` (a fixed text), ``send`` (echoes ``text``),
``delete_all`` (denied by the tests' policy), ``hang`` (logs ``hanging`` to the client, then never
answers), ``die`` (the process exits at once), ``ask`` (asks the client for a sampling, answers
with its text), ``change`` (announces a changed tool list, then answers), ``wait`` (writes
``arrived <pid> <tag>`` to stderr, then answers ``released <tag>`` once a line is written to the
FIFO named by ``GW_RELEASE``, or never when ``arguments.hold`` is true). One prompt ``greet``,
one resource ``mem://note`` and a template ``mem://notes/{id}``. The tools list comes in two
pages (a ``nextCursor``).
"""

import json
import os
import sys
import threading

TOOLS = [
    {"name": name, "description": f"the {name} tool", "inputSchema": {"type": "object"}}
    for name in ("pid", "read_secret", "send", "delete_all", "hang", "die", "ask", "change", "wait")
]
asked = {}
waiting = []  # (id, tag) of the wait calls a release answers
lock = threading.Lock()


def out(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def releases(path):
    """Each line written to the FIFO answers the wait calls held so far."""
    while True:
        with open(path) as fifo:
            for _line in fifo:
                with lock:
                    done, waiting[:] = list(waiting), []
                for msg_id, tag in done:
                    text(msg_id, f"released {tag}")
                sys.stderr.write(f"released {len(done)}\n")
                sys.stderr.flush()


if os.environ.get("GW_RELEASE"):
    threading.Thread(target=releases, args=(os.environ["GW_RELEASE"],), daemon=True).start()


def text(msg_id, value):
    out({"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": str(value)}]}})


def handle(msg):
    method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None and msg_id in asked:  # the client's answer to our sampling request
        call_id = asked.pop(msg_id)
        got = (msg.get("result") or {}).get("content", {}).get("text", "?")
        text(call_id, f"sampled {got}")
        return
    if msg_id is None:
        return
    if method == "initialize":
        out(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "result": {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {"listChanged": True}, "prompts": {}, "resources": {}},
                    "serverInfo": {"name": "gw-stdio", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        half = len(TOOLS) // 2
        if params.get("cursor") == "2":
            out({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": TOOLS[half:]}})
        else:
            out({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": TOOLS[:half], "nextCursor": "2"}})
    elif method == "prompts/list":
        out({"jsonrpc": "2.0", "id": msg_id, "result": {"prompts": [{"name": "greet"}]}})
    elif method == "prompts/get":
        body = {"messages": [{"role": "user", "content": {"type": "text", "text": f"hello from {params.get('name')}"}}]}
        out({"jsonrpc": "2.0", "id": msg_id, "result": body})
    elif method == "resources/list":
        out({"jsonrpc": "2.0", "id": msg_id, "result": {"resources": [{"uri": "mem://note", "name": "note"}]}})
    elif method == "resources/templates/list":
        templates = [{"uriTemplate": "mem://notes/{id}", "name": "notes"}]
        out({"jsonrpc": "2.0", "id": msg_id, "result": {"resourceTemplates": templates}})
    elif method == "resources/read":
        contents = [{"uri": params["uri"], "text": f"note at {params['uri']}"}]
        out({"jsonrpc": "2.0", "id": msg_id, "result": {"contents": contents}})
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "pid":
            text(msg_id, os.getpid())
        elif name == "meta":  # the _meta the upstream got (a gateway's traceparent: docs/serve.md, "Traces")
            text(msg_id, json.dumps(params.get("_meta")))
        elif name == "read_secret":
            text(msg_id, "the plans are in the drawer")
        elif name in ("send", "delete_all"):
            # " +members": the call came with a multi round-trip member (a gateway leaked its own)
            leaked = " +members" if "requestState" in params or "inputResponses" in params else ""
            text(msg_id, f"sent {args.get('text', '')}{leaked}")
        elif name == "hang":
            out({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hanging"}})
        elif name == "die":
            os._exit(3)
        elif name == "ask":
            asked[f"q{msg_id}"] = msg_id
            out(
                {
                    "jsonrpc": "2.0",
                    "id": f"q{msg_id}",
                    "method": "sampling/createMessage",
                    "params": {"messages": [], "maxTokens": 5},
                }
            )
        elif name == "wait":
            if not args.get("hold"):
                with lock:
                    waiting.append((msg_id, args.get("tag")))
            sys.stderr.write(f"arrived {os.getpid()} {args.get('tag')}\n")
            sys.stderr.flush()
        elif name == "change":
            out({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            text(msg_id, "changed")
        else:
            out({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": "Unknown tool"}})
    elif method == "ping":
        out({"jsonrpc": "2.0", "id": msg_id, "result": {}})
    else:
        out({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
