"""The trio shell of ``assay mcp wrap``: reads, calls the session, performs its effects.

All protocol logic is in :class:`assay.session.session.WrapSession`; this module moves bytes,
writes records, watches the child and the signals, and keeps time. Tasks, in one nursery:

- the client pump: our stdin -> ``receive_client_data`` / ``client_closed``;
- the server pump: the child's stdout -> ``receive_server_data`` / ``server_closed``; it waits
  until what it queued for the client was written, so a slow client slows the server down;
- the output writer of :class:`~assay.shells.stdio.clientout.ClientOutput`: the one writer of
  our stdout (server lines and wrap's replies, in the session's order, coalesced);
- the child watcher, the timer (the session's :attr:`~WrapSession.deadline`), the signal
  watcher;
- one task per :class:`~assay.session.effects.AskApprover`: the approver hook asked, its answer
  handed to ``approver_answered`` (docs/serve.md, "Out-of-band approvers").

Every task hands what the session returned to one effect runner, :meth:`Relay._perform`: a list
is performed whole, in order, by one task at a time (a ``trio.Lock``). The one exception is a
wait on a peer: while the runner waits for the child to take forwarded bytes, or for the
admission thread to judge a long line, it lets go, so a child that stops reading cannot stall
the server's output, the timer or a signal; it takes the runner back before it goes on with its
list. A failure found while performing (a record that cannot be written, the child's stdin
gone) is reported to the session and its effects are performed in the same list, not by a
nested call. The rules for one list are in :mod:`assay.session.effects` and
docs/architecture.md, "One frame's way through wrap".

The child is a :class:`assay.proc.ChildHandle`: started and stopped through :mod:`assay.proc`
(its keeper ends every process of the run), or given to the constructor (an in-memory child in
tests). The streams are :class:`~assay.proc.ByteReceiver` and :class:`~assay.proc.ByteSender`.
How each path ends is the session's decision (docs/wrap.md, "Lifecycle").
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from assay.policy.storeapi import Loaded, StoreError

from assay import proc
from assay.proc import ByteReceiver, ByteSender, ChildHandle
from assay.session.admission import admit
from assay.session.effects import (
    AdmitLine,
    AskApprover,
    CloseServerInput,
    Effect,
    Finish,
    Record,
    SignalChild,
    Sink,
    StartSession,
    StopClient,
    StoreAbort,
    StoreAttempt,
    StoreBegin,
    StoreCommit,
    ToClient,
    ToServer,
    Warn,
    WithdrawApproval,
)
from assay.shells.stdio.clientout import ClientOutput
from assay.shells.stdio.pipes import RecordSink, RelayFatal, _Pipe, bytes_of, open_stdio
from assay.session.session import KILL_AFTER_TERM_S, WrapSession

__all__ = [
    "Approver",
    "READ_SIZE",
    "REPLY_QUEUE_LIMIT",
    "RecordSink",
    "Relay",
    "RelayFatal",
    "RunResult",
    "bytes_of",
    "open_stdio",
]

READ_SIZE = 65536
REPLY_QUEUE_LIMIT = 16 << 20  # client output queued before the client pump waits for the client

Approver = Callable[[AskApprover], Awaitable[str]]
"""An out-of-band approver: asked about one held call, it answers ``accept``, ``decline``,
``cancel`` or ``failed`` (docs/serve.md, "Out-of-band approvers"). It is cancelled at the
call's deadline, when the call is settled otherwise, and with the run; an exception it raises
answers ``failed``."""


class _Batch:
    """What one list of effects gathered for writing (see :meth:`Relay._settle`)."""

    __slots__ = ("records", "replies", "forwards", "receipts")

    def __init__(self) -> None:
        self.records: dict[Sink, list[bytes]] = {}
        self.replies: list[bytes] = []
        self.forwards: list[bytes] = []
        self.receipts: list[bytes] = []

    def take(self) -> tuple[dict[Sink, list[bytes]], list[bytes], list[bytes], list[bytes]]:
        taken = self.records, self.replies, self.forwards, self.receipts
        self.records = {}
        self.replies = []
        self.forwards = []
        self.receipts = []
        return taken


@dataclass
class RunResult:
    """How a relay run ended (docs/wrap.md, "Exit status")."""

    exit_code: int
    stop_cause: str
    child_returncode: int | None
    wrap_signal: int | None = None
    fatal: str | None = None


class Relay:
    """One wrap run: construct, ``spawn()``, then ``await run()``. With ``child`` the relay
    runs that child instead of spawning ``argv`` (an in-memory child in tests)."""

    def __init__(
        self,
        argv: list[str],
        session: WrapSession,
        *,
        client_in: ByteReceiver,
        client_out: ByteSender,
        sinks: dict[Sink, RecordSink],
        warn: Callable[[str], None],
        handle_signals: bool = True,
        env: dict[str, str] | None = None,
        on_session_start: Callable[[], dict[Sink, RecordSink]] | None = None,
        child: ChildHandle | None = None,
        approver: Approver | None = None,
    ) -> None:
        self.argv = argv
        self.session = session
        self.client_in = client_in
        self.client_out = client_out
        self.sinks = sinks
        self.warn = warn
        self.handle_signals = handle_signals
        self.env = env
        self.on_session_start = on_session_start
        self.child: ChildHandle | None = child
        self.approver = approver
        self._asking: dict[str, trio.CancelScope] = {}  # the approver's tasks, by approval id
        self._nursery: trio.Nursery | None = None
        self._runner = trio.Lock()  # held by the one task performing a list of effects
        self._client_scope = trio.CancelScope()
        self._output = ClientOutput(session, client_out, perform=self._perform, check_timer=self._check_timer)
        self._timer_wake = trio.Event()
        self._timer_target: float | None = None
        self._finish: Finish | None = None
        self._finish_set = trio.Event()
        # the shared session's store work, in order, for the store task (docs/wrap.md, "Shared sessions")
        self._store_send, self._store_receive = trio.open_memory_channel[
            StoreAttempt | StoreBegin | StoreCommit | StoreAbort
        ](math.inf)

    # -- entry -----------------------------------------------------------------------------------

    def spawn(self) -> ChildHandle:
        """Start the child under proc's keeper. Raises proc.SpawnError."""
        self.child = child = proc.spawn_kept(self.argv, env=self.env)
        return child

    async def run(self) -> RunResult:
        child = self.child or self.spawn()
        self._child = child
        session = self.session
        self._to_child = _Pipe(child.stdin) if child.stdin is not None else None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.handle_signals:  # before anything is relayed: the server may have answered already
                    await nursery.start(self._signal_watch)
                nursery.start_soon(self._output.writer)
                nursery.start_soon(self._server_pump, child)
                nursery.start_soon(self._client_pump)
                nursery.start_soon(self._child_watch, child)
                nursery.start_soon(self._timer)
                if session.store is not None:
                    nursery.start_soon(self._store_task)
                await self._finish_set.wait()
                finish = self._finish
                if finish is not None and finish.drain:
                    await self._output.drain(finish.deadline)
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                returncode = await child.stop(term_grace=KILL_AFTER_TERM_S)
                await child.aclose_streams()
        cause = session.stop_cause.value if session.stop_cause is not None else "child_exit"
        return RunResult(
            exit_code=session.exit_code(returncode),
            stop_cause=cause,
            child_returncode=returncode,
            wrap_signal=session.wrap_signal,
            fatal=session.fatal,
        )

    # -- performing effects ----------------------------------------------------------------------

    async def _perform(self, effects: list[Effect]) -> None:
        """The effect runner: perform one list of effects in order, holding the runner (see the
        module's docstring; the rules are in :mod:`assay.session.effects`)."""
        runner = self._runner
        try:
            runner.acquire_nowait()  # the usual case: nobody else is performing, no scheduler pass
        except trio.WouldBlock:
            await runner.acquire()
        try:
            await self._run(effects)
        finally:
            runner.release()

    def _let_go(self) -> None:
        """Release the runner around a wait on a peer (see the module's docstring)."""
        self._runner.release()

    async def _take_back(self) -> None:
        """Take the runner back after a wait on a peer; shielded, so a cancelled task still
        holds it when it leaves :meth:`_perform` (which releases it)."""
        try:
            self._runner.acquire_nowait()
        except trio.WouldBlock:
            with trio.CancelScope(shield=True):
                await self._runner.acquire()

    async def _run(self, effects: list[Effect]) -> None:
        child = self._child
        session = self.session
        todo = deque(effects)
        batch = _Batch()
        while True:
            while todo:
                effect = todo.popleft()
                match effect:  # the most frequent first: records (one or two per call), bytes
                    case Record():
                        if effect.sink is Sink.RECEIPTS:
                            batch.receipts.append(effect.data)
                        else:
                            batch.records.setdefault(effect.sink, []).append(effect.data)
                    case ToServer():
                        batch.forwards.append(effect.data)
                    case ToClient():
                        batch.replies.append(effect.data)
                    case Warn():
                        self.warn(effect.text)
                    case StartSession():
                        if not await self._settle(batch, todo, effect):
                            continue
                        try:
                            if self.on_session_start is not None:
                                self.sinks.update(self.on_session_start())
                        except Exception as exc:  # an OutputError, or any failure creating outputs
                            todo.clear()  # nothing after it is performed
                            todo.extend(session.start_failed(str(exc)))
                    case AdmitLine():
                        if not await self._settle(batch, todo, effect):
                            continue
                        self._let_go()
                        try:
                            verdict = await trio.to_thread.run_sync(admit, effect.line)
                        finally:
                            await self._take_back()
                        todo.extendleft(reversed(session.admitted(verdict)))
                    case StoreAttempt() | StoreBegin() | StoreCommit() | StoreAbort():
                        self._store_send.send_nowait(effect)  # the store task; the list goes on
                    case AskApprover():
                        if self.approver is None or self._nursery is None:  # nobody to ask: denied
                            todo.extend(session.approver_answered(effect.approval_id, "failed"))
                        else:
                            scope = self._asking[effect.approval_id] = trio.CancelScope(deadline=effect.deadline)
                            self._nursery.start_soon(self._ask_approver, self.approver, effect, scope)
                    case WithdrawApproval():
                        asking = self._asking.pop(effect.approval_id, None)
                        if asking is not None:
                            asking.cancel()
                    case CloseServerInput():
                        if not await self._settle(batch, todo, effect):
                            continue
                        if child.stdin is not None:
                            with trio.CancelScope(shield=True):
                                await child.stdin.aclose()
                    case StopClient():
                        self._client_scope.cancel()
                    case SignalChild():
                        child.signal_group(effect.signum)
                    case Finish():
                        if self._finish is None:
                            self._finish = effect
                            self._finish_set.set()
            await self._settle(batch, todo, None)
            if not todo:  # a failure while settling put its own effects in the list
                break
        self._check_timer()

    async def _settle(self, batch: _Batch, todo: deque[Effect], barrier: Effect | None) -> bool:
        """Perform what a batch gathered: its records first (one write per sink), then its
        bytes for the client and the child, then its receipts. A record that cannot be written
        is fatal: the rest of the list is dropped for the session's ``output_failed`` effects.
        When the child's stdin is gone, the session's ``server_input_closed`` effects and the
        batch's receipts are performed next, then the ``barrier`` this settle was for. False
        when the barrier is not to be performed now."""
        records, replies, forwards, receipts = batch.take()
        for sink_name, lines in records.items():
            sink = self.sinks.get(sink_name)
            if sink is None:
                continue
            try:
                sink.write(b"".join(lines) if len(lines) > 1 else lines[0])
            except RelayFatal as exc:
                todo.clear()
                todo.extend(self.session.output_failed(str(exc)))
                return False
        push = self._output.push
        for data in replies:
            push(data)
        to_child = self._to_child
        if forwards and to_child is not None:
            self._let_go()
            try:
                await to_child.write(b"".join(forwards) if len(forwards) > 1 else forwards[0])
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                closed = self.session.server_input_closed()
                if barrier is not None:
                    todo.appendleft(barrier)
                todo.extendleft(reversed([*closed, *(Record(Sink.RECEIPTS, line) for line in receipts)]))
                return False
            finally:
                await self._take_back()
        if receipts:
            sink = self.sinks.get(Sink.RECEIPTS)
            if sink is not None:
                try:
                    sink.write(b"".join(receipts))
                except RelayFatal as exc:
                    todo.clear()
                    todo.extend(self.session.output_failed(str(exc)))
                    return False
        return True

    def _check_timer(self) -> None:
        """Wake the timer when the session's deadline appeared or moved earlier."""
        deadline = self.session.deadline
        target = self._timer_target
        if deadline is not None and (target is None or deadline < target):
            self._timer_wake.set()

    # -- tasks -----------------------------------------------------------------------------------

    async def _client_pump(self) -> None:
        session = self.session
        output = self._output
        receive = _Pipe(self.client_in).read
        with self._client_scope:
            while True:
                try:
                    data = await receive(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    await self._perform(session.client_closed())
                    return
                await self._perform(session.receive_client_data(data))
                # wrap's own replies are bounded: queued for a client that stopped reading, or
                # held in the session until a streamed server line ends (docs/wrap.md, "Output
                # to the client"); either way they leave through the writer, which wakes us.
                while (
                    output.queued_bytes > REPLY_QUEUE_LIMIT or session.held_bytes > REPLY_QUEUE_LIMIT
                ) and not output.gone:
                    await output.progress.wait()

    async def _server_pump(self, child: ChildHandle) -> None:
        session = self.session
        output = self._output
        assert child.stdout is not None
        read = _Pipe(child.stdout).read
        while True:
            try:
                data = await read(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                await self._perform(session.server_closed())
                return
            effects = session.receive_server_data(data)
            if len(effects) == 1 and not output.chunks and not output.writing and not output.gone:
                first = effects[0]
                if type(first) is ToClient:
                    await output.write_inline(first.data)
                    continue
            await self._perform(effects)
            await output.written_up_to(output.queued)

    async def _child_watch(self, child: ChildHandle) -> None:
        await child.wait_exit()
        await self._perform(self.session.child_exited(child.returncode))

    async def _timer(self) -> None:
        session = self.session
        while True:
            deadline = session.deadline
            self._timer_target = deadline
            if deadline is None:
                await self._timer_wake.wait()
            else:
                with trio.move_on_at(deadline):
                    await self._timer_wake.wait()
            self._timer_wake = trio.Event()
            if deadline is not None and trio.current_time() >= deadline:
                await self._perform(session.timer())

    async def _store_task(self) -> None:
        """The shared session's store: each :class:`StoreAttempt`, :class:`StoreBegin` and
        :class:`StoreCommit` is awaited here (the store does its I/O and lock waits off the
        event loop) and what it gave goes back to the session as an event, whose effects the
        runner performs; every other task goes on meanwhile. A result is handed to the session
        even when the run is being cancelled at that moment (the runner is taken back
        shielded), so a call the store counted is recorded."""
        session = self.session
        store = session.store
        assert store is not None
        async for effect in self._store_receive:
            if isinstance(effect, StoreAbort):
                await store.abort()
                continue
            got: int | Loaded | StoreError
            try:
                if isinstance(effect, StoreAttempt):
                    got = await store.attempt(
                        effect.key, effect.part, effect.server, effect.expect, effect.saved, effect.now
                    )
                elif isinstance(effect, StoreBegin):
                    got = await store.begin(effect.key, effect.part, effect.server, effect.now)
                else:
                    got = await store.commit(effect.saved, effect.now)
            except StoreError as exc:
                got = exc
            await self._take_back()  # shielded: a result the store gave is always told
            try:
                if isinstance(effect, StoreAttempt):
                    effects = session.store_attempted(got)
                elif isinstance(effect, StoreBegin):
                    assert not isinstance(got, int)
                    effects = session.store_begun(got)
                else:
                    assert not isinstance(got, Loaded)
                    effects = session.store_committed(got)
                await self._run(effects)
            finally:
                self._runner.release()
            # the client pump may wait for calls queued behind the store to go (held_bytes)
            self._output.progressed()

    async def _ask_approver(self, approver: Approver, effect: AskApprover, scope: trio.CancelScope) -> None:
        """One :class:`AskApprover`: the approver's answer goes to the session, unless the
        call's deadline came first or the call was settled otherwise (the scope cancelled: the
        session's timer, or whatever settled it, has its deny)."""
        answer = "failed"
        failure: str | None = None
        with scope:
            try:
                answer = await approver(effect)
            except Exception as exc:  # noqa: BLE001 - an approver that fails denies the call
                failure = exc.__class__.__name__
        if self._asking.get(effect.approval_id) is scope:
            del self._asking[effect.approval_id]
        if scope.cancelled_caught:
            return
        runner = self._runner
        try:
            runner.acquire_nowait()
        except trio.WouldBlock:
            await runner.acquire()
        try:
            if failure is not None:
                self.warn(f"[assay] the approver failed ({failure}): the call is denied")
            await self._run(self.session.approver_answered(effect.approval_id, answer))
        finally:
            runner.release()

    async def _signal_watch(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        import signal

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                await self._perform(self.session.signal(signum))
