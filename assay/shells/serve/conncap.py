"""The connection limits in hypercorn's trio worker (docs/serve.md, "Connections"): each accepted
connection asks the :class:`~assay.gateway.connections.ConnectionGate` before hypercorn reads a
byte of it (before a TLS handshake too), and tells it when it ends. A connection over a limit is
answered on plain HTTP with a 503 (``Retry-After: 1``, a JSON-RPC error body, ``Connection:
close``) and closed; over TLS it is closed without a handshake, which would cost the gateway more
than the connection costs the client.

A connection ends when its client closes it. hypercorn would hold an idle connection that the
client closed (its socket, and so its place under the caps) until its keep-alive timer ran out,
30 s later: a client that opens a connection per request would pile up 30 s of them. Once the
client's side has ended, the keep-alive timer is stopped, so the connection closes as soon as
what it was doing is done (a request in flight is still answered).

The keep-alive timer itself is one task per connection whose deadline moves (:class:`KeepAlive`).
hypercorn cancelled its timer task when a request came and started a new one after each answer:
a lock, a task started and waited for, about a tenth of the CPU hypercorn spends on a request.
Moving a deadline costs neither a task nor a wake-up. What it does is hypercorn's: an idle
connection (before its first request, between requests) is closed ``keep_alive_timeout`` after it
became idle, or at once when the server stops; a busy one is never closed by the timer.

A write takes the connection's send lock without a pass through the scheduler when the lock is
free (hypercorn's ``async with`` passes through it at every write; the write that follows is a
checkpoint of its own): 5% fewer instructions per call. A lock held is waited for as before.

A fault in hypercorn (or anything under it) that a client's bytes reach ends that connection
only: in hypercorn's trio worker an exception out of one connection's task would end the whole
server. It is reported through the gatekeeper's ``warn``, at most once a minute.

hypercorn has no setting for these; :func:`gate_connections` wraps its ``TCPServer.__init__``,
``TCPServer.run``, ``TCPServer._read_data`` and ``TCPServer.protocol_send`` (for the version
``pyproject.toml`` pins), once per process. A server whose hypercorn ``Config`` carries no :class:`Gatekeeper`
(``config.assay_gatekeeper``) is not limited; the early close, the keep-alive task and the
writes apply to every hypercorn server of the process."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import trio

from assay.gateway.connections import WARN_EVERY_S, ConnectionGate, Refused, peer_key

__all__ = ["Gatekeeper", "KeepAlive", "gate_connections", "refusal_bytes"]

#: a refused connection's answer is written, and its request read and dropped, for this long at
#: most before it is closed (so the client reads the 503 rather than a reset)
LINGER_S = 1.0
#: at most this many refused connections linger at once; past it a refused one is closed at once
LINGER_MAX = 64


def refusal_bytes(refused: Refused) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32603, "message": f"Too many connections (limits.{refused.limit}: {refused.value})"},
        }
    ).encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nretry-after: 1\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )


class Gatekeeper:
    """One server's gate, its clock and where its reports go."""

    def __init__(
        self,
        gate: ConnectionGate,
        warn: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gate = gate
        self.warn = warn
        self.clock = clock
        self.lingering = 0
        self._fault_at: float | None = None

    def enter(self, address: str) -> Refused | None:
        refused = self.gate.enter(address, self.clock())
        if refused is not None and refused.report and self.warn is not None:
            self.warn(
                f"assay: refusing connections over limits.{refused.limit} ({refused.value}); "
                f"{self.gate.open} open, {self.gate.held(address)} from {address}"
            )
        return refused

    def fault(self, exc: BaseException) -> None:
        """A connection ended by a fault in the HTTP server (a bug of hypercorn's or ours that a
        client's bytes reached): one line, at most one a minute."""
        now = self.clock()
        if self.warn is None or (self._fault_at is not None and now - self._fault_at < WARN_EVERY_S):
            return
        self._fault_at = now
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        self.warn(f"assay: a connection ended by a fault in the HTTP server ({type(exc).__name__}); the rest go on")

    async def refuse(self, stream: Any, refused: Refused) -> None:
        """Answer and close a connection :meth:`enter` refused. Never raises but Cancelled."""
        transport = getattr(stream, "transport_stream", None)
        if transport is not None or self.lingering >= LINGER_MAX:  # TLS, or too many lingering
            await trio.aclose_forcefully(transport if transport is not None else stream)
            return
        self.lingering += 1
        try:
            with trio.move_on_after(LINGER_S):
                await stream.send_all(refusal_bytes(refused))
                await stream.send_eof()
                while await stream.receive_some(65536):
                    pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.lingering -= 1
            await trio.aclose_forcefully(stream)


class KeepAlive:
    """A connection's keep-alive timer with hypercorn's ``TrioSingleTask`` interface as its
    ``TCPServer`` uses it (``restart`` when the connection turns idle, ``stop`` when a request
    comes), as one task started at the first ``restart`` that waits on a moving deadline;
    :meth:`end` ends it with the connection."""

    __slots__ = ("server", "idle", "deadline", "scope", "waiting_idle", "started", "ended")

    def __init__(self, server: Any) -> None:
        self.server = server
        self.idle = False
        self.deadline = math.inf
        self.scope: trio.CancelScope | None = None
        self.waiting_idle = False
        self.started = False
        self.ended = False

    async def restart(self, task_group: Any, _action: Any) -> None:
        self.idle = True
        self.deadline = trio.current_time() + self.server.config.keep_alive_timeout
        if not self.started:
            self.started = True
            await task_group._nursery.start(self._watch)
        elif self.scope is not None:
            if self.waiting_idle:
                self.scope.deadline = self.deadline
            else:
                self.scope.cancel()  # from the busy wait to the idle one

    async def stop(self) -> None:
        self.idle = False
        if self.scope is not None and self.waiting_idle:
            self.scope.deadline = math.inf

    def end(self) -> None:
        self.ended = True
        if self.scope is not None:
            self.scope.cancel()

    async def _watch(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        terminated = self.server.context.terminated
        while not self.ended:
            idle = self.idle
            with trio.CancelScope(deadline=self.deadline if idle else math.inf) as scope:
                self.scope, self.waiting_idle = scope, idle
                if idle:
                    await terminated.wait()
                else:
                    await trio.sleep_forever()
            self.scope = None
            if self.ended or not self.idle:
                continue
            if terminated.is_set() or trio.current_time() >= self.deadline:
                with trio.CancelScope(shield=True):
                    await self.server._initiate_server_close()
                return


def _peer(stream: Any) -> str:
    """What the per-address cap counts an accepted stream's peer by (plain or TLS;
    :func:`~assay.gateway.connections.peer_key`); "" when unknown."""
    try:
        peer = getattr(stream, "transport_stream", stream).socket.getpeername()
    except (OSError, AttributeError):
        return ""
    return peer_key(str(peer[0]) if isinstance(peer, tuple) else str(peer))


def gate_connections() -> None:
    """Install the connection limits, and the close at the client's end, in hypercorn's trio
    worker (idempotent)."""
    from hypercorn.events import Closed, RawData
    from hypercorn.trio import tcp_server

    cls: Any = tcp_server.TCPServer
    if getattr(cls, "_assay_gated", False):
        return
    run = cls.run

    async def contained_run(self: Any, keeper: Gatekeeper | None) -> None:
        """``run``, a fault in it ending this connection only: in hypercorn's trio worker an
        exception out of one connection's task ends the whole server."""
        try:
            await run(self)
        except* Exception as faults:  # Cancelled (a BaseException) goes on up
            if keeper is not None:
                keeper.fault(faults.exceptions[0])
            await trio.aclose_forcefully(self.stream)

    async def gated_run(self: Any) -> None:
        keeper: Gatekeeper | None = getattr(self.config, "assay_gatekeeper", None)
        if keeper is None:
            await contained_run(self, None)
            return
        address = _peer(self.stream)
        refused = keeper.enter(address)
        if refused is not None:
            await keeper.refuse(self.stream, refused)
            return
        try:
            await contained_run(self, keeper)
        finally:
            keeper.gate.leave(address)

    read_data = cls._read_data

    async def read_then_end(self: Any) -> None:
        try:
            await read_data(self)
        finally:
            self.idle_task.end()  # the client is gone: no keep-alive wait

    protocol_send = cls.protocol_send

    async def send_unyielding(self: Any, event: Any) -> None:
        if not isinstance(event, RawData):
            await protocol_send(self, event)
            return
        lock = self.send_lock
        try:
            lock.acquire_nowait()  # free: taken without a pass through the scheduler
        except trio.WouldBlock:
            await lock.acquire()
        try:
            try:
                with trio.CancelScope(shield=True):
                    await self.stream.send_all(event.data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self.protocol.handle(Closed())
        finally:
            lock.release()

    init = cls.__init__

    def init_keep_alive(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.idle_task = KeepAlive(self)

    cls.__init__ = init_keep_alive
    cls.protocol_send = send_unyielding
    cls.run = gated_run
    cls._read_data = read_then_end
    cls._assay_gated = True
