"""What the gateway's tests share (docs/serve.md, "Upstreams and the agent session of a user"):
a gateway over real upstreams, conversations of users, and a client that records what it is
sent. Every wait is on an event, never a sleep."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from assay.gateway.config import ServeConfig, Upstream
from assay.gateway.contract import Identity
from assay.policy import load_policy
from assay.policy.storeapi import MemoryStore
from assay.serve.gateway import ServeGateway, open_gateway

HERE = Path(__file__).resolve().parent
STDIO_SERVER = HERE / "gw_stdio_server.py"
TIMEOUT = 60.0

POLICY = """\
version: "2.0"
tools:
  allow: ["*"]
  deny: ["delete_*"]
enforcement: { unconstrained_tools: allow }
aliases:
  secret_reads: [{ tool: read_secret, server: local }]
  network_sinks: [{ tool: echo, server: web }, { tool: send, server: "*" }]
sequences:
  - type: never_after
    id: no-exfiltration
    trigger: secret_reads
    forbidden: network_sinks
    message: "nothing leaves once a secret was read"
"""


def stdio(name: str = "local", **kwargs: Any) -> Upstream:
    return Upstream(name=name, command=(sys.executable, str(STDIO_SERVER)), **kwargs)


def user(name: str) -> Identity:
    return Identity(key=f"user:https://issuer.test#{name}", subject=name, issuer="https://issuer.test")


@asynccontextmanager
async def gateway(
    tmp: Path,
    upstreams: list[Upstream],
    policy: str = POLICY,
    store: MemoryStore | None = None,
    approval_key: bytes | None = None,
    *,
    config: ServeConfig | None = None,
    approver: Any = None,
    store_for: Any = None,
    **config_more: Any,
) -> AsyncIterator[tuple[ServeGateway, list[str]]]:
    """A gateway over ``upstreams`` (or ``config``'s), with an out-of-band ``approver`` hook;
    ``config_more``: more of the config (``decision_log``, ``audit_log``: the logs are opened as
    ``assay mcp serve`` opens them). ``store_for``: the store objects' maker (by default the
    ``store``'s twins)."""
    from assay.serve.run import open_sinks

    store = store or MemoryStore()
    warnings: list[str] = []
    if config is None:
        config = ServeConfig(base_dir=str(tmp), policy="policy.yaml", upstreams=tuple(upstreams), **config_more)
    sinks = open_sinks(config)
    with trio.fail_after(TIMEOUT):
        async with open_gateway(
            config,
            load_policy(policy.encode()),
            store_for=store_for or store.twin,
            sinks=sinks,
            warn=warnings.append,
            approval_key=approval_key,
            approver=approver,
        ) as gw:
            yield gw, warnings


@dataclass
class Client:
    """One conversation of a user as its client sees it."""

    conversation: Any
    related: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)  # method of an upstream request -> result
    _next: int = 0
    changed: trio.Event = field(default_factory=trio.Event)

    async def _related(self, message: dict[str, Any]) -> None:
        self.related.append(message)
        self.changed.set()
        self.changed = trio.Event()
        if "id" in message and message.get("method") in self.answers:
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": self.answers[message["method"]]}
            await self.conversation.notify(answer)

    async def request(self, method: str, params: dict[str, Any] | None = None, msg_id: Any = None) -> dict[str, Any]:
        self._next += 1
        message = {"jsonrpc": "2.0", "id": self._next if msg_id is None else msg_id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.conversation.request(message, self._related)

    async def call(self, name: str, arguments: dict[str, Any] | None = None, msg_id: Any = None) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, msg_id)

    async def wait_related(self, predicate: Any) -> dict[str, Any]:
        with trio.fail_after(TIMEOUT):
            while True:
                for message in self.related:
                    if predicate(message):
                        return message
                await self.changed.wait()


async def connect(
    gw: ServeGateway,
    who: Identity,
    version: str = "2025-06-18",
    caps: dict | None = None,
    client_info: dict | None = None,
) -> tuple[Client, dict]:
    params = {
        "protocolVersion": version,
        "capabilities": caps or {"sampling": {}},
        "clientInfo": client_info or {"name": "t", "version": "1"},
    }
    conversation, result = await gw.open(who, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    return Client(conversation), result


def text_of(answer: dict[str, Any]) -> str:
    result = answer.get("result") or {}
    return "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


def denied(answer: dict[str, Any]) -> bool:
    result = answer.get("result")
    return isinstance(result, dict) and result.get("isError") is True or "error" in answer


REPO = HERE.parent.parent
REMOTE_SERVER = REPO / "tests" / "e2e" / "remote_server.py"
EVERYTHING_SERVER = (
    REPO / "tests" / "e2e" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)


@asynccontextmanager
async def remote_server(tmp: Path, env: dict[str, str] | None = None) -> AsyncIterator[str]:
    """tests/e2e/remote_server.py (the Python SDK's Streamable HTTP server) on 127.0.0.1; its URL,
    once it printed ``READY <url>``."""
    import subprocess

    argv = [sys.executable, str(REMOTE_SERVER), "--mode", "streamable", "--call-log", str(tmp / "calls.ndjson")]
    import os

    environ = {**os.environ, **(env or {})}
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=environ)
    assert process.stdout is not None
    try:
        buffer = b""
        with trio.fail_after(TIMEOUT):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive_some(4096)
                assert chunk, "the remote server ended before it was ready"
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode()
        assert line.startswith("READY "), line
        yield line.split()[1]
    finally:
        process.kill()
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            await process.wait()
        await process.stdout.aclose()


def local_serve_config(tmp: Path, extra: str = "") -> Path:
    """A serve.yaml (and its policy.yaml, :data:`POLICY`) in ``tmp`` for a real `assay mcp
    serve` on 127.0.0.1, any port, without authentication (loopback), with one stdio upstream
    ``local`` (:data:`STDIO_SERVER`); ``extra``: more top-level lines. Its path."""
    (tmp / "policy.yaml").write_text(POLICY)
    config = tmp / "serve.yaml"
    config.write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:0
public_url: http://127.0.0.1/mcp
state_dir: {tmp / "state"}
identity: {{none: true}}
{extra}
upstreams:
  local: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]}}
"""
    )
    return config
