"""serve_http: hypercorn's trio worker running the front inside the caller's nursery
(docs/serve.md, "How a request flows", "Stopping").

HTTP/1.1 and HTTP/2 (h2 over TLS by ALPN; h2c by prior knowledge or upgrade on plain HTTP).
``stop`` set (the entry sets it on SIGTERM) drains: no new requests (the listeners close, a
request on an open connection gets 503), the GET streams end, pending requests are answered
within ``limits.drain_timeout_s``, then cancelled and answered with an error (written within
:data:`ANSWER_GRACE_S` more); the sessions are closed last.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import trio

from assay.gateway.config import Limits
from assay.gateway.connections import ConnectionGate
from assay.gateway.contract import Authenticate, Gateway
from assay.gateway.http import MCP_PATH
from assay.gateway.sealed import Sealer

from .app import Front
from .conncap import Gatekeeper, gate_connections
from .h2streams import guard_h2_streams
from .heads import hold_heads

__all__ = ["ANSWER_GRACE_S", "Bound", "serve_http"]

#: after the drain deadline, how long the answers of the requests cancelled then have to be written
ANSWER_GRACE_S = 2.0


@dataclass(frozen=True)
class Bound:
    """Where the front listens, once it does (``port`` the bound one when ``listen`` said 0)."""

    host: str
    port: int
    #: the endpoint's URL (http:// or https://)
    url: str


def _bound(binds: list[str]) -> Bound:
    first = urlsplit(binds[0])
    return Bound(first.hostname or "", first.port or 0, f"{binds[0]}{MCP_PATH}")


async def serve_http(
    *,
    listen: str,
    gateway: Gateway,
    authenticate: Authenticate,
    limits: Limits,
    origins: Iterable[str] = (),
    resource_url: str | None = None,
    resource_metadata: Mapping[str, Any] | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    sealer: Sealer | None = None,
    on_ready: Callable[[Bound], None] | None = None,
    stop: trio.Event | None = None,
    report: Callable[[str], None] | None = None,
    connections: ConnectionGate | None = None,
    task_status: trio.TaskStatus[Bound] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serves /mcp on ``listen`` (``host:port``) until ``stop`` is set (then drains) or the
    caller cancels (then stops at once). Reports where it listens through ``task_status`` and
    ``on_ready``; ``report`` gets a line when connections are refused over the limits, counted in
    ``connections`` (one of the limits' own when not given)."""
    from hypercorn.config import Config  # serve's path only
    from hypercorn.trio import serve

    hold_heads()  # one write per answer on HTTP/1.1 (heads.py)
    gate_connections()  # the connection limits (conncap.py)
    guard_h2_streams()  # HTTP/2 data for a stream answered early (h2streams.py)
    resource_path = urlsplit(resource_url).path if resource_url else MCP_PATH
    config = Config()
    config.bind = [listen]
    config.accesslog = None  # an access log would be one more place a header could leak
    config.errorlog = logging.getLogger("assay.serve.http")
    config.include_server_header = False
    # the requests not answered by the drain deadline are cancelled then, and answered with an
    # error; the connections get this much longer to write those answers before they are closed
    config.graceful_timeout = limits.drain_timeout_s + ANSWER_GRACE_S
    config.keep_alive_timeout = limits.keep_alive_s
    gate = connections or ConnectionGate(limits.max_connections, limits.max_connections_per_address)
    config.assay_gatekeeper = Gatekeeper(gate, report)  # type: ignore[attr-defined]
    if tls_cert is not None and tls_key is not None:
        config.certfile, config.keyfile = tls_cert, tls_key
    stop = stop if stop is not None else trio.Event()
    served = trio.Event()

    async def shutdown_trigger() -> None:
        await stop.wait()
        front.drain()

    async def worker(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await serve(
                cast(Any, front), config, shutdown_trigger=shutdown_trigger, task_status=task_status, mode="asgi"
            )
        finally:
            served.set()

    async def drain_deadline() -> None:
        await stop.wait()
        await trio.sleep(limits.drain_timeout_s)
        front.cancel_requests()

    async with trio.open_nursery() as nursery:
        front = Front(
            gateway=gateway,
            authenticate=authenticate,
            limits=limits,
            tasks=nursery,
            origins=origins,
            resource_path=resource_path or MCP_PATH,
            resource_metadata=resource_metadata,
            sealer=sealer,
        )
        nursery.start_soon(front.expire_sessions)
        nursery.start_soon(drain_deadline)
        try:
            binds: list[str] = await nursery.start(worker)
            bound = _bound(binds)
            task_status.started(bound)
            if on_ready is not None:
                on_ready(bound)
            await served.wait()
        finally:
            nursery.cancel_scope.cancel()
            await front.close_sessions()
