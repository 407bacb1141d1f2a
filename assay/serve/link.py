"""One guarded link: one user's session with one upstream, behind wrap's guard whole
(docs/serve.md, "Upstreams and the agent session of a user").

A link is a :class:`~assay.session.session.WrapSession` driven by the stdio shell's
:class:`~assay.shells.stdio.relay.Relay`, exactly as ``assay mcp wrap`` runs one, except that its
client side is in memory: the gateway is the link's MCP client. It writes the link's
``initialize`` (with the user's client capabilities), ``notifications/initialized``, then its
requests with its own ids into :class:`_Inbox`; what the session gives the client arrives, a
line at a time, in :class:`_Outbox`: the answers go to the request waiting for them, everything
else (the upstream's notifications and requests, wrap's own approval elicitations) to the
gateway's ``on_message``.

The relay's child is the user's own process of a stdio upstream (started here, never shared) or
the remote server (:func:`assay.shells.upstream_http.connect.run_remote`, what ``wrap --url``
runs). A link with nothing in flight for the upstream's ``idle_timeout_s`` closes its client
side, and wrap's lifecycle stops the child; a link whose child ends answers every request still
waiting on it with an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
import trio

from assay import proc
from assay.gateway.config import Secret, Upstream
from assay.gateway.http import INVALID_REQUEST
from assay.gateway.router import UPSTREAM_FAILED, error
from assay.serve.observe import Watch
from assay.session.effects import Sink
from assay.session.session import WrapSession
from assay.shells.stdio.pipes import RecordSink
from assay.shells.stdio.relay import Approver, Relay

__all__ = ["BASE_ENV", "Link", "LinkError", "read_secret"]

#: what a stdio upstream inherits of the gateway's environment; the rest is the config's ``env``
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT")

_json = msgspec.json.Encoder()
_decode = msgspec.json.Decoder()


class LinkError(Exception):
    """The link cannot be opened (one line: the process did not start, the server is not
    reachable, the handshake failed)."""


def read_secret(secret: Secret, base_dir: str, environ: Mapping[str, str]) -> str:
    """A secret's value: the file's content (relative to the config's directory, the trailing
    newline stripped) or the environment variable's. Raises :class:`LinkError`, naming where it
    looked, never a value."""
    if secret.file is not None:
        path = os.path.join(base_dir, secret.file)
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read(1 << 16).rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise LinkError(f"cannot read the secret file {path} ({exc.__class__.__name__})") from None
    if secret.env is not None:
        value = environ.get(secret.env)
        if value is None:
            raise LinkError(f"the secret's environment variable {secret.env} is not set")
        return value
    raise LinkError("a secret names neither a file nor an environment variable")


#: how every request the link writes begins (msgspec keeps the dict's order): its id comes next
_REQUEST_HEAD = b'{"jsonrpc":"2.0","id":'


class _Inbox:
    """The relay's client input: lines the gateway writes (a :class:`~assay.proc.ByteReceiver`)."""

    def __init__(self) -> None:
        self.send, self._receive = trio.open_memory_channel[bytes](math.inf)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return b""


class _Outbox:
    """The relay's client output (a :class:`~assay.proc.ByteSender`): split into lines, each
    decoded and handed to ``deliver``."""

    def __init__(self, deliver: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self._deliver = deliver
        self._buffer = b""
        self.closed = False

    async def send_all(self, data: bytes) -> None:
        if self.closed:
            raise trio.ClosedResourceError("the gateway closed this link")
        *lines, self._buffer = (self._buffer + bytes(data)).split(b"\n")
        for line in lines:
            try:
                message = _decode.decode(line)
            except msgspec.DecodeError:
                continue  # the session writes whole JSON lines; nothing else is routable
            if isinstance(message, dict):
                await self._deliver(message)

    async def aclose(self) -> None:
        self.closed = True


class _Waiter:
    __slots__ = ("done", "answer")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.answer: dict[str, Any] | None = None


class Link:
    """One user's guarded session with one upstream: :meth:`run` in a nursery (``nursery.start``
    returns once the handshake is done), then :meth:`request` and :meth:`send`."""

    def __init__(
        self,
        upstream: Upstream,
        session: WrapSession,
        *,
        capabilities: Mapping[str, Any],
        version: str,
        on_message: Callable[[Link, dict[str, Any]], Awaitable[None]],
        sinks: dict[Sink, RecordSink],
        warn: Callable[[str], None],
        base_dir: str,
        environ: Mapping[str, str],
        max_frame_bytes: int,
        auth: Any = None,
        eras: dict[Any, Mapping[str, Any]] | None = None,
        approver: Approver | None = None,
        clients: dict[int, tuple[str, str | None]] | None = None,
        watch: Watch | None = None,
        client_ids: dict[int, Any] | None = None,
    ) -> None:
        self.upstream = upstream
        self.name = upstream.name
        self.session = session
        self.capabilities = dict(capabilities)
        self.version = version
        self.on_message = on_message
        self.sinks = sinks
        self.warn = warn
        self.base_dir = base_dir
        self.environ = environ
        self.max_frame_bytes = max_frame_bytes
        # a url upstream's httpx2 auth (assay.auth.upstream_auth: docs/serve.md, "Credentials to upstreams")
        self.auth = auth
        # the out-of-band approver the relay asks (docs/serve.md, "Out-of-band approvers")
        self.approver = approver
        # the client of each request in flight, by the link's id (what the session's records ask:
        # docs/serve.md, "Records")
        self.clients: dict[int, tuple[str, str | None]] = {} if clients is None else clients
        # and the id its client sent it with (the records carry it)
        self.client_ids: dict[int, Any] = {} if client_ids is None else client_ids
        # the metrics' watch of this link (docs/serve.md, "Health and metrics"); None: none kept
        self.watch = watch
        self.alive = False
        self.closed = trio.Event()
        self.failure: str | None = None
        self.initialize_result: dict[str, Any] = {}
        self._inbox = _Inbox()
        self._outbox = _Outbox(self._received)
        self._pending: dict[int, _Waiter] = {}
        # the requests in flight of 2026-07-28-era clients: their id -> the client's capabilities
        # (the link's session reads it: SessionOptions.request_era)
        self.eras: dict[Any, Mapping[str, Any]] = {} if eras is None else eras
        self._next = 0
        self.last_used = trio.current_time()  # a request sent or answered (the idle watch reads it)

    # -- the gateway's side ------------------------------------------------------------------------

    @property
    def busy(self) -> int:
        return len(self._pending)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        era: Mapping[str, Any] | None = None,
        client: tuple[str, str | None] | None = None,
        client_id: Any = None,
    ) -> dict[str, Any]:
        """Send one request with the gateway's own id; its answer (``result`` or ``error``, that
        id). Cancelled: the upstream is told (``notifications/cancelled``). ``era``: the client's
        capabilities when the request is of the 2026-07-28 era. ``client``: the name and version
        of the client it comes from, and ``client_id`` the id it sent the request with (not None),
        which its records carry."""
        if not self.alive:
            return error(None, UPSTREAM_FAILED, self._gone())
        self._next += 1
        mine = self._next
        waiter = self._pending[mine] = _Waiter()
        if era is not None:
            self.eras[mine] = era
        if client is not None:
            self.clients[mine] = client
        if client_id is not None:
            self.client_ids[mine] = client_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": mine, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._touch()
        watch = self.watch
        if watch is not None:
            watch.sent(mine)
        self.write(message)
        try:
            await waiter.done.wait()
        except trio.Cancelled:
            if self._pending.pop(mine, None) is not None and self.alive:
                self.write({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": mine}})
            raise
        finally:
            self.eras.pop(mine, None)
            self.clients.pop(mine, None)
            self.client_ids.pop(mine, None)
            self._touch()
            if watch is not None:
                watch.done(mine, waiter.answer)
        assert waiter.answer is not None
        return waiter.answer

    def unread(self, line: bytes, reason: str) -> None:
        """The guard refused a line of this link unread (``SessionOptions.on_unread``): when it
        is one of the link's requests, that request is answered with the refusal now; the
        guard's own answer carries a null id, which no waiter would ever match. The link wrote
        the line itself, so its id is read from where the link's encoding puts it."""
        if not line.startswith(_REQUEST_HEAD):
            return
        digits, comma, rest = line[len(_REQUEST_HEAD) : len(_REQUEST_HEAD) + 40].partition(b",")
        if not comma or not digits.isdigit() or not rest.startswith(b'"method":'):
            return
        waiter = self._pending.pop(int(digits), None)
        if waiter is not None:
            waiter.answer = error(None, INVALID_REQUEST, f"Invalid request: the guard could not read it ({reason})")
            waiter.done.set()

    def pending_id(self, waiter_id: int) -> bool:
        return waiter_id in self._pending

    def write(self, message: Mapping[str, Any]) -> None:
        """One message to the link (a notification, an answer to the upstream's request)."""
        if self.alive:
            self._inbox.send.send_nowait(_json.encode(message) + b"\n")

    def close(self) -> None:
        """End the link: its client side closes, wrap's lifecycle stops the upstream."""
        self._inbox.send.close()

    def _touch(self) -> None:
        self.last_used = trio.current_time()

    def _gone(self) -> str:
        why = f": {self.failure}" if self.failure else ""
        return f"upstream {self.name} is not available{why}"

    async def _received(self, message: dict[str, Any]) -> None:
        if "method" not in message and ("result" in message or "error" in message):
            msg_id = message.get("id")
            waiter = self._pending.pop(msg_id, None) if isinstance(msg_id, int) else None
            if waiter is not None:
                self.last_used = trio.current_time()
                waiter.answer = message
                waiter.done.set()
            return
        await self.on_message(self, message)

    # -- the run -----------------------------------------------------------------------------------

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the upstream, shake hands, report started, serve until idle or lost; every
        request still waiting is answered with an error at the end."""
        try:
            if self.upstream.transport == "stdio":
                await self._run_stdio(task_status)
            else:
                await self._run_remote(task_status)
        finally:
            self.alive = False
            self._outbox.closed = True
            for waiter in self._pending.values():
                waiter.answer = error(None, UPSTREAM_FAILED, self._gone())
                waiter.done.set()
            self._pending.clear()
            self.closed.set()

    def _relay(self, child: proc.ChildHandle | None) -> Relay:
        return Relay(
            list(self.upstream.command),
            self.session,
            client_in=self._inbox,
            client_out=self._outbox,
            sinks=self.sinks,
            warn=self.warn,
            handle_signals=False,
            child=child,
            approver=self.approver,
        )

    def _child_env(self) -> dict[str, str]:
        env = {name: self.environ[name] for name in BASE_ENV if name in self.environ}
        for name, value in self.upstream.env:
            env[name] = value if isinstance(value, str) else read_secret(value, self.base_dir, self.environ)
        return env

    async def _run_stdio(self, task_status: trio.TaskStatus[None]) -> None:
        up = self.upstream
        cwd = os.path.join(self.base_dir, up.cwd) if up.cwd else None
        try:
            # proc.spawn, not the keeper's fork: the gateway has threads (the store's), and a
            # fork copies only the forking thread. Own group, and SIGKILLed with the gateway.
            child = proc.spawn(
                list(up.command),
                stdin=proc.PIPE,
                stdout=proc.PIPE,
                stderr=proc.INHERIT,
                env=self._child_env(),
                cwd=cwd,
                own_group=True,
                die_with_parent=True,
            )
        except proc.SpawnError as exc:
            raise LinkError(f"cannot start upstream {up.name}: {exc.strerror or exc}") from None
        await self._drive(self._relay(child), task_status)

    async def _run_remote(self, task_status: trio.TaskStatus[None]) -> None:
        from assay.shells.upstream_http.connect import RemoteStartError, run_remote
        from assay.shells.upstream_http.http import HttpServer
        from assay.shells.upstream_http.target import Target

        up = self.upstream
        assert up.url is not None
        from assay.auth.upstream_creds import UpstreamCredError

        target = Target(url=up.url, transport="auto", headers=(), ca_file=None)

        async def body(server: HttpServer) -> None:
            await self._drive(self._relay(server), task_status)
            if server.failure:
                self.failure = server.failure

        try:
            await run_remote(
                target,
                body,
                cap=self.max_frame_bytes,
                warn=self.warn,
                environ=self.environ,
                connect_timeout=up.connect_timeout_s,
                auth=self.auth,
                needs_login=(UpstreamCredError,),
            )
        except RemoteStartError as exc:
            raise LinkError(f"upstream {up.name}: {exc}") from None

    async def _drive(self, relay: Relay, task_status: trio.TaskStatus[None]) -> None:
        ended = trio.Event()

        async def relay_run() -> None:
            try:
                result = await relay.run()
                if result.fatal and not self.failure:
                    self.failure = result.fatal
            finally:
                self.alive = False
                ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay_run)
            self.alive = True
            try:
                with trio.fail_after(self.upstream.connect_timeout_s):
                    answer = await self.request(
                        "initialize",
                        {
                            "protocolVersion": self.version,
                            "capabilities": self.capabilities,
                            "clientInfo": {"name": "assay-serve", "version": _version()},
                        },
                    )
            except trio.TooSlowError:
                nursery.cancel_scope.cancel()
                raise LinkError(
                    f"upstream {self.name}: no answer to initialize within {self.upstream.connect_timeout_s:g} s"
                ) from None
            result = answer.get("result")
            if not isinstance(result, dict):
                nursery.cancel_scope.cancel()
                why = (answer.get("error") or {}).get("message") if isinstance(answer.get("error"), dict) else None
                raise LinkError(f"upstream {self.name}: initialize failed ({why or self._gone()})")
            self.initialize_result = result
            self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
            task_status.started()
            await self._idle_watch(ended)
            self.alive = False  # a request from now on opens a new link
            self.close()
            await ended.wait()
            nursery.cancel_scope.cancel()

    async def _idle_watch(self, ended: trio.Event) -> None:
        """Return once the link had nothing in flight for ``idle_timeout_s``, or its relay ended."""
        # No task or event per request: the watch sleeps until the link would be idle, then looks
        # at what happened meanwhile (requests only move ``last_used`` on).
        idle = self.upstream.idle_timeout_s
        while True:
            deadline = self.last_used + idle
            if self._pending:  # a request in flight: look again once it could be idle
                deadline = max(deadline, trio.current_time() + idle)
            with trio.move_on_at(deadline):
                await ended.wait()
                return
            if not self._pending and trio.current_time() >= self.last_used + idle:
                return


def _version() -> str:
    from assay._version import __version__

    return __version__
