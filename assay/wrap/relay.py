"""The wrap relay: one trio nursery around the child MCP server (wrap.md §2, DECISIONS D14).

Tasks: the client pump (our stdin -> admission -> session -> child stdin / replies), the server
pump (child stdout -> our stdout, byte for byte), the child watcher and the signal watcher. All
policy logic lives in :mod:`assay.wrap.session`; this module only moves bytes, writes records
and manages the child's life: no orphans, and every byte the child wrote reaches the client.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from assay import proc
from assay.wrap.admission import LineSplitter, Rejected, admit
from assay.wrap.session import FrameOutcome, WrapSession

READ_SIZE = 65536
SERVER_TAIL_LIMIT = 1 << 20  # a partial server line is held back up to this size (see _server_pump)
SERVER_OBSERVE_LIMIT = 64 << 20  # largest server line read for tool identities (a tools/list answer)
KILL_AFTER_TERM_S = 0.5  # D14: SIGKILL the group 0.5 s after SIGTERM


class RelayFatal(Exception):
    """A fatal condition during the run: the relay stops the child and exits 2 (D14a)."""

    def __init__(self, message: str, stop_cause: str) -> None:
        super().__init__(message)
        self.stop_cause = stop_cause


class RecordSink:
    """An open output that records are appended to, fail-closed (D14a): a failed write raises."""

    def __init__(self, name: str, fh) -> None:
        self.name = name
        self._fh = fh

    def write(self, data: bytes) -> None:
        try:
            self._fh.write(data)
            self._fh.flush()
        except OSError as exc:
            raise RelayFatal(f"cannot write {self.name}: {exc.strerror or exc}", "output_error") from None

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            pass


@dataclass
class RunResult:
    """How a relay run ended. ``exit_code`` follows D14."""

    exit_code: int
    stop_cause: str
    child_returncode: int | None
    wrap_signal: int | None = None
    fatal: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def exit_status(child_returncode: int | None, wrap_signal: int | None) -> int:
    """D14: 128+N if wrap got signal N; else the child's code, or 128+N if it died of signal N."""
    if wrap_signal is not None:
        return 128 + wrap_signal
    if child_returncode is None:
        return 2
    if child_returncode < 0:
        return 128 - child_returncode
    return child_returncode


class Relay:
    """One wrap run. Construct, then ``await run()``; the result carries the exit status."""

    def __init__(
        self,
        argv: list[str],
        session: WrapSession,
        *,
        client_in: trio.abc.ReceiveStream,
        client_out: trio.abc.SendStream,
        sinks: dict[str, RecordSink],
        warn: Callable[[str], None],
        max_frame_bytes: int,
        shutdown_grace: float,
        handle_signals: bool = True,
        env: dict[str, str] | None = None,
        on_session_start: Callable[[], dict[str, RecordSink]] | None = None,
    ) -> None:
        self.argv = argv
        self.session = session
        self.client_in = client_in
        self.client_out = client_out
        self.sinks = sinks
        self.warn = warn
        self.max_frame_bytes = max_frame_bytes
        self.shutdown_grace = shutdown_grace
        self.handle_signals = handle_signals
        self.env = env
        self.on_session_start = on_session_start
        self.child: proc.Child | None = None
        self._out_lock = trio.Lock()
        self._stop_cause: str | None = None
        self._wrap_signal: int | None = None
        self._fatal: RelayFatal | None = None
        self._child_exited = trio.Event()
        self._server_done = trio.Event()
        self._client_gone = False
        self.start_failed = False  # the one-run outputs could not be created (OR-8)

    # -- entry -----------------------------------------------------------------------------------

    def spawn(self) -> proc.Child:
        """Start the child (own process group, dies with us). Raises proc.SpawnError."""
        self.child = proc.spawn(
            self.argv,
            stdin=proc.PIPE,
            stdout=proc.PIPE,
            stderr=proc.INHERIT,
            env=self.env,
            own_group=True,
            die_with_parent=True,
        )
        return self.child

    async def run(self) -> RunResult:
        child = self.child or self.spawn()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._server_pump, child)
                nursery.start_soon(self._client_pump, child)
                nursery.start_soon(self._child_watch, child)
                if self.handle_signals:
                    nursery.start_soon(self._signal_watch, child)
        finally:
            returncode = await child.stop(term_grace=KILL_AFTER_TERM_S)
            await child.aclose_streams()
        cause = self._stop_cause or "child_exit"
        if self._fatal is not None:
            code = 2 if self._wrap_signal is None else 128 + self._wrap_signal
        else:
            code = exit_status(returncode, self._wrap_signal)
        return RunResult(
            exit_code=code,
            stop_cause=cause,
            child_returncode=returncode,
            wrap_signal=self._wrap_signal,
            fatal=str(self._fatal) if self._fatal else None,
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _end(self, cause: str) -> None:
        """First cause wins; ending cancels every task (the child is stopped in run())."""
        if self._stop_cause is None:
            self._stop_cause = cause
        self._nursery.cancel_scope.cancel()

    async def _to_client(self, data: bytes) -> None:
        if self._client_gone or not data:
            return
        try:
            self._out_lock.acquire_nowait()  # uncontended: no extra trip through the scheduler
        except trio.WouldBlock:
            await self._out_lock.acquire()
        try:
            await self.client_out.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The client closed its side: nobody can read replies any more. Treat as EOF.
            self._client_gone = True
            self._end("client_eof")
        finally:
            self._out_lock.release()

    # -- client -> server ------------------------------------------------------------------------

    async def _client_pump(self, child: proc.Child) -> None:
        splitter = LineSplitter(self.max_frame_bytes)
        try:
            while True:
                try:
                    data = await self.client_in.receive_some(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    break
                items = splitter.feed(data)
                if items:
                    await self._handle_batch(child, items)
            last = splitter.close()
            if last is not None:
                await self._handle_batch(child, [last])
            if self.session.starts_session_at_eof():
                self._start_session()
        except RelayFatal as exc:
            self._fatal = exc
            self._end(exc.stop_cause)
            return
        if self._stop_cause is None:
            self._stop_cause = "client_eof"
        if child.stdin is not None:
            with trio.CancelScope(shield=True):
                await child.stdin.aclose()
        await self._shutdown_after_eof(child)

    async def _handle_batch(self, child: proc.Child, items: list[bytes | Rejected]) -> None:
        """Judge every frame of one read, then write records, replies and forwards in bulk.

        Records are written before the frames they describe are forwarded or answered, so a
        failing record write stops the run before the frame has any effect (D14a).
        """
        outcomes: list[FrameOutcome] = []
        for item in items:
            judged = admit(item) if isinstance(item, bytes) else item
            if judged is None:
                continue
            if self.session.starts_session(judged):
                # Pre-session frames are done first; if the outputs cannot be created the
                # triggering frame is neither handled nor forwarded (OR-8).
                await self._apply(child, outcomes)
                outcomes = []
                self._start_session()
            outcomes.append(self.session.handle(judged))
        await self._apply(child, outcomes)

    def _start_session(self) -> None:
        """The run becomes a session: create the one-run outputs (OR-7), fail closed (OR-8)."""
        self.session.begin_session()
        if self.on_session_start is not None:
            try:
                self.sinks.update(self.on_session_start())
            except Exception as exc:  # an OutputError, or any failure creating outputs
                self.start_failed = True
                raise RelayFatal(str(exc), "output_error") from None

    async def _apply(self, child: proc.Child, outcomes: list[FrameOutcome]) -> None:
        """Perform the outcomes of one read, in frame order, with as few writes as possible.

        A frame's records are written before its forward or reply (fail closed, D14a): when a
        record write fails, the frames before it still get their effects and the failing frame
        gets none. Replies and forwards are batched into one write each; receipts follow them
        (wrap.md §6.8: written once the frame's outcome is complete).
        """
        replies: list[bytes] = []
        forwards: list[bytes] = []
        receipts: list[bytes] = []
        try:
            for outcome in outcomes:
                for line in outcome.stderr:
                    self.warn(line)
                if outcome.records:
                    self._write_records(outcome.records)
                if outcome.reply:
                    replies.append(outcome.reply)
                if outcome.forward:
                    forwards.append(outcome.forward)
                if outcome.receipt:
                    receipts.append(outcome.receipt)
        except RelayFatal:
            # A failed record write: what came before the failing frame still happens.
            with trio.CancelScope(shield=True):
                await self._flush(child, replies, forwards, receipts)
            raise
        await self._flush(child, replies, forwards, receipts)

    def _write_records(self, records: list[tuple[str, bytes]]) -> None:
        by_sink: dict[str, list[bytes]] = {}
        for name, line in records:
            by_sink.setdefault(name, []).append(line)
        for name, lines in by_sink.items():
            sink = self.sinks.get(name)
            if sink is not None:
                sink.write(b"".join(lines))

    async def _flush(self, child: proc.Child, replies: list[bytes], forwards: list[bytes], receipts: list[bytes]) -> None:
        if replies:
            await self._to_client(b"".join(replies))
        if forwards and child.stdin is not None:
            try:
                await child.stdin.send_all(b"".join(forwards))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise RelayFatal(
                    f"cannot write to the wrapped command: {_why(exc)}", "child_write_failed"
                ) from None
        if receipts and "receipts" in self.sinks:
            self.sinks["receipts"].write(b"".join(receipts))

    async def _shutdown_after_eof(self, child: proc.Child) -> None:
        """D14 client EOF: let the child finish; SIGTERM the group after the grace, SIGKILL 0.5 s later."""
        with trio.move_on_after(self.shutdown_grace):
            await self._child_exited.wait()
            return
        child.signal_group(signal.SIGTERM)
        with trio.move_on_after(KILL_AFTER_TERM_S):
            await self._child_exited.wait()
            return
        child.signal_group(signal.SIGKILL)

    # -- server -> client ------------------------------------------------------------------------

    async def _server_pump(self, child: proc.Child) -> None:
        """Relay child stdout byte for byte, whole lines at a time (our replies never split one).

        A partial line is held back until its newline, up to SERVER_TAIL_LIMIT; beyond that it
        is written through while holding the output lock until the line completes. While a
        tools/list answer is awaited, such a long line is also kept (up to SERVER_OBSERVE_LIMIT)
        so that a large tool list still yields the identities tool_pins are checked against.
        """
        tail = b""
        held = False  # we hold the output lock across a partial line
        seen: bytearray | None = None  # the start of a held line, kept for observation
        stream = child.stdout
        assert stream is not None
        try:
            while True:
                try:
                    data = await stream.receive_some(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    break
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    if held:
                        seen = self._keep(seen, data)
                        await self._write_held(data)
                        continue
                    tail += data
                    if len(tail) > SERVER_TAIL_LIMIT:
                        await self._out_lock.acquire()
                        held = True
                        seen = self._keep(bytearray() if self.session.wants_server_lines else None, tail)
                        await self._write_held(tail)
                        tail = b""
                    continue
                complete, rest = data[:cut], data[cut:]
                if self.session.wants_server_lines:
                    start = bytes(seen) if held and seen is not None else tail
                    for line in (start + complete).split(b"\n"):  # LF only, as on the client side
                        for text in self.session.observe_server_line(line):
                            self.warn(text)
                if held:
                    await self._write_held(complete)
                    self._out_lock.release()
                    held = False
                    seen = None
                else:
                    await self._to_client(tail + complete)
                tail = rest
            if tail:
                if held:
                    await self._write_held(tail)
                else:
                    await self._to_client(tail)
        finally:
            if held:
                self._out_lock.release()
            self._server_done.set()

    def _keep(self, seen: bytearray | None, data: bytes) -> bytearray | None:
        """Grow the observation copy of a held line, dropping it past SERVER_OBSERVE_LIMIT."""
        if seen is None:
            return None
        if len(seen) + len(data) > SERVER_OBSERVE_LIMIT:
            self.warn("[assay] WARNING: a server line over "
                      f"{SERVER_OBSERVE_LIMIT} bytes was relayed without reading tool identities from it")
            return None
        seen += data
        return seen

    async def _write_held(self, data: bytes) -> None:
        if self._client_gone:
            return
        try:
            await self.client_out.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._client_gone = True

    # -- child and signals -----------------------------------------------------------------------

    async def _child_watch(self, child: proc.Child) -> None:
        """D14 child exits first: relay all it wrote, then end at once (no wait for client EOF)."""
        await child.wait_exit()
        self._child_exited.set()
        # Output already in the pipe still comes through; a descendant that keeps the pipe
        # open gets the grace period, then the group is swept in run().
        with trio.move_on_after(max(self.shutdown_grace, 0.05)):
            await self._server_done.wait()
        self._end("child_exit")

    async def _signal_watch(self, child: proc.Child) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                self._wrap_signal = signum
                if self._stop_cause is None:
                    self._stop_cause = "signal"
                child.signal_group(signal.SIGTERM)
                with trio.move_on_after(KILL_AFTER_TERM_S):
                    await self._child_exited.wait()
                child.signal_group(signal.SIGKILL)
                return


def _why(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return "Broken pipe"


async def open_stdio() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream, Callable[[], None]]:
    """Our own stdin/stdout as trio streams, and a function restoring their blocking flags."""
    saved = {}
    for fd in (0, 1):
        try:
            saved[fd] = os.get_blocking(fd)
        except OSError:
            pass
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))

    def restore() -> None:
        for fd, blocking in saved.items():
            try:
                os.set_blocking(fd, blocking)
            except OSError:
                pass

    return stdin, stdout, restore
