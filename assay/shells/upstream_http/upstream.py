"""A remote MCP server as the relay's child: the HTTP shell of ``assay mcp wrap --url``.

:class:`RemoteServer` is a :class:`assay.proc.ChildHandle` whose stdin takes the frames the
session forwards and whose stdout gives the server's messages as lines, so the relay and the
sans-IO session run exactly as for a command over stdio (docs/remote.md; docs/architecture.md,
"Remote servers"). What it does with them is the transport's (:mod:`assay.shells.upstream_http.http`,
:mod:`assay.shells.upstream_http.legacy`); what is common lives here:

- the server's messages, queued for the relay and counted with what the streams hold in one
  budget (:mod:`assay.shells.upstream_http.budget`): a client that stops reading stops the server's streams,
  as a full pipe does;
- the requests sent and not answered yet, so that whatever happens upstream each gets an answer:
  the server's, or wrap's JSON-RPC error (:func:`assay.shells.upstream_http.messages.error_line`);
- the end: the input closed (the client's EOF) lets what is in flight finish; a signal from the
  lifecycle stops it at once; a lost connection or an expired session answers every pending
  request, ends the output and sets :attr:`failure` (the stop record's ``upstream_error``).

Every task runs in the nursery :func:`open_remote` opens; :meth:`stop` cancels them.
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from assay.framing import BoundedLineSplitter
from assay.shells.upstream_http.budget import Budget
from assay.shells.upstream_http.messages import Incoming, error_line, incoming
from assay.session.pending import id_key

__all__ = ["HELD_LIMIT", "OUT_BATCH", "RemoteServer"]

HELD_LIMIT = 256 << 20  # bytes held for the client at once over every stream (or the cap, if larger)
OUT_BATCH = 1 << 20  # bytes of messages handed to the relay at once (at least one message)


class _Input:
    """The stdin the relay writes forwarded frames to."""

    def __init__(self, server: RemoteServer) -> None:
        self._server = server

    async def send_all(self, data: bytes) -> None:
        await self._server.take_frames(data)

    async def aclose(self) -> None:
        self._server.input_closed()


class _Output:
    """The stdout the relay reads the server's messages from."""

    def __init__(self, server: RemoteServer) -> None:
        self._server = server

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self._server.next_output()


class RemoteServer(ABC):
    """The common part of a remote server (see the module docstring). A transport subclasses it
    and implements :meth:`send` (one frame upstream) and :meth:`close_upstream`."""

    def __init__(self, *, cap: int, warn: Callable[[str], None]) -> None:
        self._tasks: trio.Nursery | None = None  # set by :meth:`host`
        self.cap = cap
        self.warn = warn
        self.stdin = _Input(self)
        self.stdout = _Output(self)
        self.returncode: int | None = None
        self.failure: str | None = None
        self._scope = trio.CancelScope()  # :meth:`host`'s: cancels every task of the transport
        self._out: deque[bytes] = deque()
        self._out_wake = trio.Event()
        self.budget = Budget(max(HELD_LIMIT, cap))
        self._ended = False  # no more output: EOF once the queue is empty
        self._exited = trio.Event()
        self._input_closed = False
        self._stopped = False
        self.goodbye = True  # say goodbye upstream at the end (not after SIGKILL or a failure)
        self._warned: set[str] = set()
        self._inflight = 0
        self._idle = trio.Event()
        self._idle.set()
        self._splitter: BoundedLineSplitter[bytes | None] = BoundedLineSplitter(cap, lambda _n, _d: None)
        # requests sent upstream and not answered: id key -> [decoded id, how many in flight, method]
        self.pending: dict[Any, list[Any]] = {}

    async def host(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery of the transport's tasks (run with ``nursery.start``); it ends when
        :meth:`end` or :meth:`stop` cancels it."""
        async with trio.open_nursery() as tasks:
            self._scope = tasks.cancel_scope
            self._tasks = tasks
            task_status.started()
            await trio.sleep_forever()

    # -- ChildHandle ------------------------------------------------------------------------

    async def wait_exit(self) -> None:
        await self._exited.wait()

    def signal_group(self, sig: int) -> None:
        """The lifecycle's TERM or KILL: stop now; pending requests get wrap's answer."""
        self.end(None, answer=True, goodbye=sig != signal.SIGKILL)

    async def stop(self, *, term_grace: float = 0.5) -> int | None:
        if self._stopped:
            return self.returncode
        self._stopped = True
        if not self._ended:
            self.end(None, answer=True, goodbye=True)
        with trio.CancelScope(shield=True):
            self._scope.cancel()
            with trio.move_on_after(max(term_grace, 0.0) + 2.0):
                await self.close_upstream()
        if self.returncode is None:
            self.returncode = 1 if self.failure else 0
        self._exited.set()
        return self.returncode

    async def aclose_streams(self) -> None:
        return None

    # -- frames from the client ----------------------------------------------------------------

    async def take_frames(self, data: bytes) -> None:
        if self._input_closed or self._ended:
            raise trio.BrokenResourceError("the remote server is gone")
        for line in self._splitter.feed(data):
            if line is not None:
                await self.send(line)

    def input_closed(self) -> None:
        """The client's EOF: what is in flight finishes, then the server is let go."""
        if self._input_closed:
            return
        self._input_closed = True
        self.start(self._finish_when_idle, counted=False)

    async def _finish_when_idle(self) -> None:
        await self._idle.wait()
        self.end(None, answer=True, goodbye=True)

    def start(self, fn: Callable[..., Any], *args: Any, counted: bool = True) -> None:
        """Run ``fn(*args)`` as a task of this server (cancelled by :meth:`stop`). A counted
        task is in flight: the client's EOF waits for it (streams of their own are not)."""
        if self._ended or self._tasks is None:
            return

        async def task() -> None:
            try:
                await fn(*args)
            except Exception as exc:  # a fault of wrap's own must not end it with a traceback
                self.fail(f"wrap's HTTP side failed ({type(exc).__name__})")
            finally:
                if counted:
                    self._inflight -= 1
                    if self._inflight == 0:
                        self._idle.set()

        if counted:
            self._inflight += 1
            if self._idle.is_set():
                self._idle = trio.Event()
        self._tasks.start_soon(task)

    # -- what the transport implements ----------------------------------------------------------

    @abstractmethod
    async def send(self, line: bytes) -> None:
        """Send one client frame upstream (its bytes unchanged); answers come through
        :meth:`emit` or :meth:`answer_error`."""

    @abstractmethod
    async def close_upstream(self) -> None:
        """End the session upstream when :attr:`goodbye` (DELETE); bounded by the caller."""

    # -- pending requests ----------------------------------------------------------------------

    def sent(self, request_id: Any, method: str | None = None) -> Any:
        """A request went upstream: its key (None for an id that is not one)."""
        key = id_key(request_id)
        if key is not None:
            entry = self.pending.setdefault(key, [request_id, 0, method])
            entry[1] += 1
        return key

    def on_answer(self, method: str | None, seen: Incoming) -> str | None:
        """A transport's look at an answer to a request of ``method`` before it is relayed: why
        the server cannot be used (then the run fails with that reason), or None."""
        return None

    def answered(self, key: Any) -> None:
        entry = self.pending.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.pending[key]

    def is_pending(self, key: Any) -> bool:
        return key is not None and key in self.pending

    def answer_error(self, key: Any, message: str, data: dict[str, Any] | None = None) -> None:
        """Wrap's answer to a pending request the server will not answer."""
        entry = self.pending.get(key)
        if entry is None or self._ended:
            return
        self.answered(key)
        self._push(error_line(entry[0], message, data))

    # -- the server's messages -----------------------------------------------------------------

    def emit(self, line: bytes, seen: Incoming | None = None) -> Incoming:
        """Queue one server message (a line) for the relay; what it answers is no longer
        pending. It counts in the budget until the relay takes it (the streams wait, not this).
        Returns :func:`incoming`'s reading of it (``seen``, when the caller read it already)."""
        if seen is None:
            seen = incoming(line)
        if seen.kind == "response":
            key = id_key(seen.id)
            entry = self.pending.get(key)
            if entry is not None:
                refused = self.on_answer(entry[2], seen)
                if refused is not None:
                    self.fail(refused)
                    return seen
            self.answered(key)
        self._push(line)
        return seen

    def _push(self, line: bytes) -> None:
        if self._ended:
            return
        self._out.append(line)
        self.budget.enqueue(len(line))
        self._out_wake.set()

    async def next_output(self) -> bytes:
        """The next messages for the relay: those queued, up to :data:`OUT_BATCH` bytes (at
        least one message), so that the relay never holds the whole budget at once."""
        while not self._out:
            if self._ended:
                self.returncode = 1 if self.failure else 0
                self._exited.set()
                return b""
            await self._out_wake.wait()
            self._out_wake = trio.Event()
        out = self._out
        if len(out) == 1 or len(out[0]) >= OUT_BATCH:
            data = out.popleft()
        else:
            taken = [out.popleft()]
            size = len(taken[0])
            while out and size + len(out[0]) <= OUT_BATCH:
                size += len(out[0])
                taken.append(out.popleft())
            data = b"".join(taken)
        self.budget.dequeue(len(data))
        return data

    def warn_once(self, what: str, text: str) -> None:
        """One stderr line per kind of trouble (``what``), however often it happens."""
        if what not in self._warned:
            self._warned.add(what)
            self.warn(text)

    # -- the end ---------------------------------------------------------------------------

    def fail(self, reason: str, data: dict[str, Any] | None = None) -> None:
        """The server is lost (connection, expired session): one line, every pending request
        answered, the output ended (docs/remote.md, "When the server fails")."""
        if self._ended:
            return
        self.failure = reason
        count = sum(entry[1] for entry in self.pending.values())
        self.warn(
            f"[assay] upstream error: {reason}"
            + (f"; answering {count} pending request(s) with an error" if count else "")
        )
        self.end(f"assay: upstream error: {reason}", answer=True, goodbye=False, data=data)

    def end(self, message: str | None, *, answer: bool, goodbye: bool, data: dict[str, Any] | None = None) -> None:
        """No more output after what is queued (and wrap's answers to what is pending)."""
        if self._ended:
            return
        if answer:
            text = message or "assay: upstream error: the remote server's session ended before it answered"
            for key in list(self.pending):
                while key in self.pending:
                    self.answer_error(key, text, data)
        self._ended = True
        self.goodbye = goodbye
        self._scope.cancel()
        self._out_wake.set()
        self.budget.close()
