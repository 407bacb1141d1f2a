"""serve_admin: the admin listener of ``assay mcp serve`` (docs/serve.md, "Health and metrics").

A small ASGI app on hypercorn's trio worker, in the caller's nursery, apart from /mcp: ``GET
/healthz`` (the process serves: always 200), ``GET /readyz`` (200 when ``ready`` says so, else 503
with one line of why) and ``GET /metrics`` (the Prometheus text that ``metrics`` gives). No
authentication: it says nothing secret (no user, no token, no path), and belongs on loopback or
a private network. It stops when the caller cancels it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import trio

from assay.gateway.connections import ConnectionGate

from .asgi import lifespan
from .conncap import Gatekeeper, gate_connections
from .h2streams import guard_h2_streams
from .server import Bound

__all__ = ["ADMIN_MAX_CONNECTIONS", "ADMIN_MAX_CONNECTIONS_PER_ADDRESS", "Admin", "serve_admin"]

#: connections open at once on the admin listener, in all and from one peer address
ADMIN_MAX_CONNECTIONS = 64
ADMIN_MAX_CONNECTIONS_PER_ADDRESS = 16

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_TEXT = (b"content-type", b"text/plain; charset=utf-8")
_NO_STORE = (b"cache-control", b"no-store")


class Admin:
    """The admin listener's ASGI app. ``ready`` returns None when ready, else why not (one line
    naming nothing secret); ``metrics`` returns the exposition and its content type (None: no
    /metrics)."""

    def __init__(
        self,
        *,
        ready: Callable[[], Awaitable[str | None]],
        metrics: Callable[[], tuple[bytes, str]] | None = None,
    ) -> None:
        self.ready = ready
        self.metrics = metrics

    async def __call__(self, scope: Mapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if path not in ("/healthz", "/readyz", "/metrics") or (path == "/metrics" and self.metrics is None):
            await _respond(send, 404, b"not found\n", [_TEXT], method)
            return
        if method not in ("GET", "HEAD"):
            await _respond(send, 405, b"method not allowed\n", [_TEXT, (b"allow", b"GET, HEAD")], method)
            return
        if path == "/healthz":
            await _respond(send, 200, b"ok\n", [_TEXT, _NO_STORE], method)
        elif path == "/readyz":
            why = await self.ready()
            if why is None:
                await _respond(send, 200, b"ready\n", [_TEXT, _NO_STORE], method)
            else:
                await _respond(send, 503, f"not ready: {why}\n".encode(), [_TEXT, _NO_STORE], method)
        else:
            assert self.metrics is not None
            body, content_type = self.metrics()
            await _respond(send, 200, body, [(b"content-type", content_type.encode("latin-1")), _NO_STORE], method)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]], method: str) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode("ascii"))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body, "more_body": False})


async def serve_admin(
    *, listen: str, app: Admin, task_status: trio.TaskStatus[Bound] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serves ``app`` on ``listen`` (``host:port``, plain HTTP/1.1 and h2c) until cancelled;
    reports where it listens through ``task_status``."""
    from hypercorn.config import Config  # serve's path only
    from hypercorn.trio import serve

    config = Config()
    config.bind = [listen]
    config.accesslog = None
    config.errorlog = logging.getLogger("assay.serve.admin")
    config.include_server_header = False
    config.keep_alive_timeout = 30
    # a scraper and a balancer's checks need few connections: a flood of them cannot take the
    # files the gateway needs (docs/serve.md, "Health and metrics")
    gate_connections()
    guard_h2_streams()
    gate = ConnectionGate(ADMIN_MAX_CONNECTIONS, ADMIN_MAX_CONNECTIONS_PER_ADDRESS)
    config.assay_gatekeeper = Gatekeeper(gate)  # type: ignore[attr-defined]

    async def worker(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await serve(cast(Any, app), config, task_status=task_status, mode="asgi")

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(worker)
        first = urlsplit(binds[0])
        task_status.started(Bound(first.hostname or "", first.port or 0, binds[0]))
