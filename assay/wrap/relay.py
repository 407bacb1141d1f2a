"""The wrap relay: one trio nursery around the child MCP server (wrap.md §2, DECISIONS D14).

Tasks: the client pump (our stdin -> admission -> session -> child stdin / replies), the server
pump (child stdout -> our stdout, byte for byte), the child watcher and the signal watcher. All
policy logic lives in :mod:`assay.wrap.session`; this module only moves bytes, writes records
and manages the child's life: no orphans, and every byte the child wrote reaches the client.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
from collections.abc import Callable
from dataclasses import dataclass

import trio

from assay import proc
from assay.wrap.admission import LineSplitter, Rejected, admit
from assay.wrap.session import FrameOutcome, WrapSession

READ_SIZE = 65536
SERVER_HOLD_LIMIT = 64 << 20  # a server line is held whole (and read by the session) up to this size
REPLY_QUEUE_LIMIT = 16 << 20  # wrap's own replies waiting for the client, before the client pump waits
BIG_CLIENT_LINE = 1 << 20  # client lines at least this long are admitted off the trio thread
KILL_AFTER_TERM_S = 0.5  # SIGKILL 0.5 s after SIGTERM
SIGNAL_DRAIN_S = 0.5  # after a signal, output already written still gets this long to reach the client
FATAL_FLUSH_S = 5.0  # on a fatal record error, the frames before it get this long to take effect


class RelayFatal(Exception):
    """A fatal condition during the run: the relay stops the child and exits 2."""

    def __init__(self, message: str, stop_cause: str) -> None:
        super().__init__(message)
        self.stop_cause = stop_cause


class RecordSink:
    """An open output that records are appended to, fail-closed: a record is written whole
    before the frame it describes has any effect. Short writes are retried; a write that cannot
    complete raises :class:`RelayFatal`, and a partial record is cut off again (regular files),
    so a log never ends in a fragment."""

    def __init__(self, name: str, fh) -> None:
        self.name = name
        self._fh = fh
        self._fd = fh.fileno()

    def write(self, data: bytes) -> None:
        done = 0
        try:
            view = memoryview(data)
            while done < len(data):
                n = os.write(self._fd, view[done:])
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                done += n
        except OSError as exc:
            if done:
                self._cut(done)
            raise RelayFatal(f"cannot write {self.name}: {exc.strerror or exc}", "output_error") from None

    def _cut(self, written: int) -> None:
        try:
            st = os.fstat(self._fd)
            if stat.S_ISREG(st.st_mode):
                os.ftruncate(self._fd, max(0, st.st_size - written))
        except OSError:
            pass

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            pass


@dataclass
class RunResult:
    """How a relay run ended (docs/wrap.md, "Exit status")."""

    exit_code: int
    stop_cause: str
    child_returncode: int | None
    wrap_signal: int | None = None
    fatal: str | None = None


def exit_status(child_returncode: int | None, wrap_signal: int | None) -> int:
    """128+N if wrap got signal N; else the child's code, or 128+N if it died of signal N."""
    if wrap_signal is not None:
        return 128 + wrap_signal
    if child_returncode is None:
        return 2
    if child_returncode < 0:
        return 128 - child_returncode
    return child_returncode


class Relay:
    """One wrap run. Construct, then ``await run()``; the result carries the exit status.

    How each path ends (docs/wrap.md, "Lifecycle"):

    - the child exits first: the client pump stops, every byte the child wrote is delivered
      however slowly the client reads (no timer cancels delivery), then the run ends;
    - client EOF: the child's stdin is closed; while it still owes replies and keeps writing,
      the grace period counts from its last output; then SIGTERM, then SIGKILL;
    - a write to the child fails (EPIPE): the same as the child exiting, never fatal;
    - SIGINT, SIGTERM, SIGHUP: SIGTERM to the child, SIGKILL 0.5 s later, exit 128+N;
    - a record cannot be written: fatal, exit 2.

    Whatever the path, the child is stopped through :mod:`assay.proc`, whose keeper ends every
    process of the run (its group and any descendant that left it).
    """

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
        self.child: proc.KeptChild | proc.Child | None = None
        self._out_lock = trio.Lock()
        self._stop_cause: str | None = None
        self._wrap_signal: int | None = None
        self._fatal: RelayFatal | None = None
        self._child_exited = trio.Event()
        self._server_done = trio.Event()
        self._client_gone = False
        self._client_scope = trio.CancelScope()
        # wrap's own replies (denies, rejections) wait here for the client, never for the server
        self._replies: list[bytes] = []
        self._reply_bytes = 0
        self._reply_wake = trio.Event()
        self._reply_room = trio.Event()
        self._midline = False  # a server line longer than SERVER_HOLD_LIMIT is being streamed
        self._last_output = 0.0  # trio clock of the child's last output
        self.start_failed = False  # the one-run outputs could not be created

    # -- entry -----------------------------------------------------------------------------------

    def spawn(self) -> proc.KeptChild | proc.Child:
        """Start the child under proc's keeper. Raises proc.SpawnError."""
        self.child = proc.spawn_kept(self.argv, env=self.env)
        return self.child

    async def run(self) -> RunResult:
        child = self.child or self.spawn()
        self._last_output = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._server_pump, child)
                nursery.start_soon(self._reply_writer)
                nursery.start_soon(self._client_side, child)
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

    def _cause(self, cause: str) -> None:
        if self._stop_cause is None:
            self._stop_cause = cause

    def _lost_client(self) -> None:
        """The client closed its side: nobody can read replies any more. Treat as EOF."""
        self._client_gone = True
        self._end("client_eof")

    async def _send(self, data: bytes) -> None:
        """Write to the client; the caller holds the output lock."""
        if self._client_gone or not data:
            return
        try:
            await self.client_out.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._lost_client()

    async def _drain_replies(self) -> None:
        """Write queued replies; the caller holds the output lock and no server line is open."""
        while self._replies and not self._midline:
            data = b"".join(self._replies)
            self._replies.clear()
            self._reply_bytes = 0
            self._reply_room.set()
            await self._send(data)

    async def _to_client(self, data: bytes) -> None:
        """Whole server lines to the client, then any replies that queued meanwhile."""
        try:
            self._out_lock.acquire_nowait()  # uncontended: no extra trip through the scheduler
        except trio.WouldBlock:
            await self._out_lock.acquire()
        try:
            await self._send(data)
            if self._replies:
                await self._drain_replies()
        finally:
            self._out_lock.release()

    async def _queue_reply(self, data: bytes) -> None:
        """Hand a reply to the reply writer. Waits only when REPLY_QUEUE_LIMIT bytes are queued,
        that is when the client itself stopped reading."""
        if self._client_gone:
            return
        self._replies.append(data)
        self._reply_bytes += len(data)
        self._reply_wake.set()
        while self._reply_bytes > REPLY_QUEUE_LIMIT and not self._client_gone:
            self._reply_room = trio.Event()
            await self._reply_room.wait()

    async def _reply_writer(self) -> None:
        while True:
            await self._reply_wake.wait()
            self._reply_wake = trio.Event()
            if not self._replies:
                continue
            async with self._out_lock:  # waits at most for the server line in progress
                await self._drain_replies()

    async def _replies_flushed(self) -> None:
        """Wait until every queued reply reached the client (or the client is gone)."""
        while self._replies and not self._client_gone:
            async with self._out_lock:
                await self._drain_replies()

    # -- client -> server ------------------------------------------------------------------------

    async def _client_side(self, child) -> None:
        with self._client_scope:
            await self._client_pump(child)

    async def _client_pump(self, child) -> None:
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
                if items and not await self._handle_batch(child, items):
                    return await self._child_gone_quiet(child)
            last = splitter.close()
            if last is not None and not await self._handle_batch(child, [last]):
                return await self._child_gone_quiet(child)
            if self.session.starts_session_at_eof():
                self._start_session()
        except RelayFatal as exc:
            self._fatal = exc
            self._end(exc.stop_cause)
            return
        self._cause("client_eof")
        if child.stdin is not None:
            with trio.CancelScope(shield=True):
                await child.stdin.aclose()
        await self._shutdown_after_eof(child)

    async def _child_gone_quiet(self, child) -> None:
        """The child stopped reading (EPIPE): this is the child-exit path. Stop reading the
        client; if the child lingers, it gets the client-EOF treatment."""
        self._cause("child_exit")
        if child.stdin is not None:
            with trio.CancelScope(shield=True):
                await child.stdin.aclose()
        await self._shutdown_after_eof(child)

    async def _handle_batch(self, child, items: list[bytes | Rejected]) -> bool:
        """Judge every frame of one read, then write records, replies and forwards in bulk.

        Records are written before the frames they describe are forwarded or answered, so a
        failing record write stops the run before the frame has any effect. Returns False when
        the child no longer reads its stdin.
        """
        outcomes: list[FrameOutcome] = []
        for item in items:
            if isinstance(item, bytes):
                if len(item) >= BIG_CLIENT_LINE:  # keep the other direction moving meanwhile
                    judged = await trio.to_thread.run_sync(admit, item)
                else:
                    judged = admit(item)
            else:
                judged = item
            if judged is None:
                continue
            if self.session.starts_session(judged):
                # Pre-session frames are done first; if the outputs cannot be created the
                # triggering frame is neither handled nor forwarded.
                if not await self._apply(child, outcomes):
                    return False
                outcomes = []
                self._start_session()
            outcomes.append(self.session.handle(judged))
        return await self._apply(child, outcomes)

    def _start_session(self) -> None:
        """The run becomes a session: create the one-run outputs, fail closed."""
        self.session.begin_session()
        if self.on_session_start is not None:
            try:
                self.sinks.update(self.on_session_start())
            except Exception as exc:  # an OutputError, or any failure creating outputs
                self.start_failed = True
                raise RelayFatal(str(exc), "output_error") from None

    async def _apply(self, child, outcomes: list[FrameOutcome]) -> bool:
        """Perform the outcomes of one read, in frame order, with as few writes as possible.

        A frame's records are written before its forward or reply: when a record write fails,
        the frames before it still get their effects and the failing frame gets none. Replies
        are queued for the reply writer (never waiting on server output), forwards go to the
        child in one write; receipts follow them (written once the frame's outcome is complete).
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
            with trio.CancelScope(shield=True), trio.move_on_after(FATAL_FLUSH_S):
                await self._flush(child, replies, forwards, receipts)
                await self._replies_flushed()
            raise
        return await self._flush(child, replies, forwards, receipts)

    def _write_records(self, records: list[tuple[str, bytes]]) -> None:
        by_sink: dict[str, list[bytes]] = {}
        for name, line in records:
            by_sink.setdefault(name, []).append(line)
        for name, lines in by_sink.items():
            sink = self.sinks.get(name)
            if sink is not None:
                sink.write(b"".join(lines))

    async def _flush(self, child, replies: list[bytes], forwards: list[bytes], receipts: list[bytes]) -> bool:
        ok = True
        if replies:
            await self._queue_reply(b"".join(replies))
        if forwards and child.stdin is not None:
            try:
                await child.stdin.send_all(b"".join(forwards))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                ok = False  # the child stopped reading: the child-exit path
        if receipts and "receipts" in self.sinks:
            self.sinks["receipts"].write(b"".join(receipts))
        return ok

    async def _shutdown_after_eof(self, child) -> None:
        """Let the child finish. The grace counts from client EOF, or from the child's last
        output while it still owes replies; then SIGTERM, then SIGKILL 0.5 s later."""
        eof = trio.current_time()
        while True:
            base = max(eof, self._last_output) if self._owes_replies() else eof
            with trio.move_on_at(base + self.shutdown_grace):
                await self._child_exited.wait()
                return
            if self._owes_replies() and self._last_output + self.shutdown_grace > trio.current_time():
                continue  # it wrote meanwhile: keep waiting
            break
        child.signal_group(signal.SIGTERM)
        with trio.move_on_after(KILL_AFTER_TERM_S):
            await self._child_exited.wait()
            return
        child.signal_group(signal.SIGKILL)

    def _owes_replies(self) -> bool:
        """Does a forwarded request still await the server's answer?"""
        return self.session.wants_server_lines

    # -- server -> client ------------------------------------------------------------------------

    def _judge_lines(self, chunk: bytes) -> bytes:
        """``chunk`` is whole LF-terminated lines: what of it goes to the client. The session
        sees every line (pins, pending ids) and may drop a response nobody asked for."""
        server_line = self.session.server_line
        lines = chunk.split(b"\n")
        lines.pop()  # after the last LF
        keep: list[bytes] | None = None
        for i, line in enumerate(lines):
            relay_it, notes = server_line(line)
            for text in notes:
                self.warn(text)
            if not relay_it and keep is None:
                keep = lines[:i]
            elif relay_it and keep is not None:
                keep.append(line)
        if keep is None:
            return chunk
        return b"".join(line + b"\n" for line in keep)

    async def _server_pump(self, child) -> None:
        """Relay child stdout whole lines at a time, byte for byte (our replies never split one).

        A partial line is held until its LF, up to SERVER_HOLD_LIMIT, so nothing waits on a
        half-written line. A longer line is streamed through under the output lock (its content
        is not read: the session is told it was unreadable); wrap's replies queue meanwhile.
        """
        tail = bytearray()
        streaming = False
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
                self._last_output = trio.current_time()
                if streaming:
                    nl = data.find(b"\n")
                    if nl < 0:
                        await self._send(data)
                        continue
                    await self._send(data[: nl + 1])
                    streaming = False
                    self._midline = False
                    await self._drain_replies()
                    self._out_lock.release()
                    data = data[nl + 1:]
                    if not data:
                        continue
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    tail += data
                    if len(tail) > SERVER_HOLD_LIMIT:
                        for text in self.session.server_line_unreadable():
                            self.warn(text)
                        await self._out_lock.acquire()
                        streaming = True
                        self._midline = True
                        await self._send(bytes(tail))
                        tail = bytearray()
                    continue
                if tail:
                    tail += data[:cut]
                    chunk = bytes(tail)
                    tail = bytearray(data[cut:])
                else:
                    chunk = data[:cut] if cut < len(data) else data
                    if cut < len(data):
                        tail = bytearray(data[cut:])
                out = self._judge_lines(chunk)
                if out:
                    await self._to_client(out)
            if tail and not streaming:
                # an unterminated last line: relayed as it is (it answers nothing we can match)
                await self._to_client(bytes(tail))
        finally:
            if streaming:
                self._midline = False
                self._out_lock.release()
            self._server_done.set()

    # -- child and signals -----------------------------------------------------------------------

    async def _child_watch(self, child) -> None:
        """The child exits: stop reading the client, deliver all it wrote, then end.

        No timer cancels delivery. Only when a descendant keeps the child's stdout open and
        stays silent for the grace period is the run's process tree killed, which closes it.
        """
        await child.wait_exit()
        self._child_exited.set()
        self._client_scope.cancel()
        while not self._server_done.is_set():
            with trio.move_on_at(self._last_output + max(self.shutdown_grace, 0.05)):
                await self._server_done.wait()
            if self._server_done.is_set():
                break
            if self._last_output + max(self.shutdown_grace, 0.05) <= trio.current_time():
                child.signal_group(signal.SIGKILL)
                await self._server_done.wait()
        await self._replies_flushed()
        self._end("child_exit")

    async def _signal_watch(self, child) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                self._wrap_signal = signum
                self._cause("signal")
                self._client_scope.cancel()
                child.signal_group(signal.SIGTERM)
                with trio.move_on_after(KILL_AFTER_TERM_S):
                    await self._child_exited.wait()
                if not self._child_exited.is_set():
                    child.signal_group(signal.SIGKILL)
                with trio.move_on_after(SIGNAL_DRAIN_S):
                    await self._server_done.wait()
                    await self._replies_flushed()
                self._end("signal")
                return


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
