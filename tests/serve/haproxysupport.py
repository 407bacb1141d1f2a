"""A real HAProxy (Debian's haproxy, which `./dev test` installs) in front of `assay mcp serve`
replicas, for the replica tests (docs/serve.md, "Behind HAProxy"), and the 2026-07-28-era call
they make through it. HAProxy takes a socket the test already listens on (``bind fd@N``), so a
connection made before it runs waits in the backlog: nothing to wait for but the answers."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from test_serve_replicas import KEYS

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _binary() -> str:
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if haproxy is None:
        pytest.fail("haproxy is not installed (./dev test installs Debian's haproxy)", pytrace=False)
    return haproxy


def _config(fd: int, backends: list[int], backend_options: str) -> str:
    servers = "".join(f"    server r{i} 127.0.0.1:{p}\n" for i, p in enumerate(backends))
    return f"""\
global
    maxconn 2048
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend mcp
    bind fd@{fd}
    default_backend assay
backend assay
    balance roundrobin
{backend_options}{servers}"""


@asynccontextmanager
async def haproxy(tmp: Path, backends: list[int], backend_options: str = "") -> AsyncIterator[str]:
    """HAProxy balancing round robin over the replicas listening on ``backends`` (ports on
    127.0.0.1), with ``backend_options`` (lines of the backend section); the ``/mcp`` URL."""
    binary = _binary()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    port = listener.getsockname()[1]
    cfg = tmp / "haproxy.cfg"
    cfg.write_text(_config(listener.fileno(), backends, backend_options))
    check = subprocess.run(
        [binary, "-c", "-f", str(cfg)], capture_output=True, text=True, pass_fds=(listener.fileno(),)
    )
    assert check.returncode == 0, check.stdout + check.stderr
    proxy = await trio.lowlevel.open_process(
        [binary, "-db", "-f", str(cfg)], stdin=subprocess.DEVNULL, pass_fds=(listener.fileno(),)
    )
    listener.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proxy.terminate()
        with trio.CancelScope(shield=True):
            await proxy.wait()


async def call(
    http: httpx2.AsyncClient, url: str, who: str, n: int, name: str, arguments: dict[str, Any] | None = None
) -> httpx2.Response:
    """One 2026-07-28-era ``tools/call`` of ``name`` by ``who`` (JSON-RPC id ``n``)."""
    body = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}, "_meta": META},
    }
    headers = {
        "Authorization": f"Bearer {KEYS[who]}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    return await http.post(url, json=body, headers=headers)


async def answer(http: httpx2.AsyncClient, url: str, who: str, n: int, name: str, **arguments: Any) -> dict[str, Any]:
    """:func:`call`'s JSON-RPC answer (it must be a 200)."""
    r = await call(http, url, who, n, name, arguments)
    assert r.status_code == 200, (r.status_code, r.text)
    got: dict[str, Any] = r.json()
    return got
