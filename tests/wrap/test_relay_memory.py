"""The relay in memory: a real WrapSession and a real Relay, an in-memory child (an echo server
coroutine behind trio memory streams, a :class:`assay.proc.ChildHandle`), the client driven by
the test; no process, no sleeps (trio's MockClock jumps over the grace periods).

Covers the paths of docs/wrap.md, "Lifecycle" as the shell performs them, and the effect
runner's rule (docs/architecture.md, "One frame's way through wrap"): whatever an effect does,
records, replies, warnings, signals, is done by the one task holding the runner.
"""

from __future__ import annotations

import json
import signal

import pytest
import trio
import trio.testing

from assay.policy import load_policy
from assay.session.effects import Sink
from assay.shells.stdio.relay import Relay, RelayFatal, RunResult
from assay.session.session import SessionOptions, WrapSession

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["echo"]\n  deny: ["exec"]\n')


def frame(rid: int, method: str, **params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"


def call(rid: int, name: str) -> bytes:
    return frame(rid, "tools/call", name=name, arguments={"q": "x"})


class BrokenInput:
    """A child's stdin that stopped taking bytes (EPIPE)."""

    async def send_all(self, data: bytes) -> None:
        raise trio.BrokenResourceError("the child closed its stdin")

    async def aclose(self) -> None:
        pass


class MemoryChild:
    """A :class:`assay.proc.ChildHandle` in memory: an echo server coroutine that answers every
    request with its method and arguments; it exits 0 at the end of its stdin, with ``code`` on
    a ``quit`` notification, and -N on SIGTERM/SIGKILL."""

    def __init__(self, *, stdin_broken: bool = False) -> None:
        self.stdin, self._server_in = trio.testing.memory_stream_one_way_pair()
        self._server_out, self.stdout = trio.testing.memory_stream_one_way_pair()
        if stdin_broken:
            self.stdin = BrokenInput()
        self.returncode: int | None = None
        self.seen: list[dict] = []  # every frame the server read
        self.signals: list[int] = []  # SignalChild effects
        self.stopped_running = False
        self._exited = trio.Event()
        self._alive = trio.CancelScope()

    async def serve(self) -> None:
        with self._alive:  # cancelled when it is killed
            await self._serve()

    async def _serve(self) -> None:
        buffer = b""
        while self.returncode is None:
            data = await self._server_in.receive_some(65536)
            if not data:
                return await self._exit(0)
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                self.seen.append(message)
                if message.get("method") == "quit":
                    return await self._exit(message["params"]["code"])
                if "id" in message:
                    answer = {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {"method": message["method"], "params": message.get("params")},
                    }
                    await self._server_out.send_all(json.dumps(answer).encode() + b"\n")

    async def _exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            await self._server_out.aclose()
            self._exited.set()

    # -- ChildHandle --

    async def wait_exit(self) -> None:
        await self._exited.wait()

    def signal_group(self, sig: int) -> None:
        self.signals.append(sig)
        self._deliver(sig)

    def _deliver(self, sig: int) -> None:
        if sig in (signal.SIGTERM, signal.SIGKILL) and self.returncode is None:
            self.returncode = -sig
            self._alive.cancel()
            self._server_out.close()
            self._exited.set()

    async def stop(self, *, term_grace: float = 0.5) -> int | None:
        if self.returncode is None:  # the relay's stop at the end, not an effect
            self.stopped_running = True
            self._deliver(signal.SIGTERM)
        return self.returncode

    async def aclose_streams(self) -> None:
        for stream in (self.stdin, self.stdout):
            await stream.aclose()


class MemorySink:
    """A record sink in memory; ``fail`` makes its writes fail the way a full disk does."""

    def __init__(self, name: str, probe: Probe, fail: bool = False) -> None:
        self.name, self.probe, self.fail = name, probe, fail
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.probe.check("record")
        if self.fail:
            raise RelayFatal(f"cannot write {self.name}: No space left on device")
        self.data += data

    def close(self) -> None:
        pass


class Probe:
    """Checks that every effect is performed by the task holding the effect runner."""

    def __init__(self) -> None:
        self.relay: Relay | None = None
        self.done: list[str] = []

    def check(self, what: str) -> None:
        assert self.relay is not None
        owner = self.relay._runner.statistics().owner
        assert owner is trio.lowlevel.current_task(), f"{what} performed outside the runner"
        self.done.append(what)

    def attach(self, relay: Relay, child: MemoryChild) -> None:
        self.relay = relay
        push, signal_group = relay._output.push, child.signal_group

        def push_out(data: bytes) -> None:
            self.check("reply")
            push(data)

        def signal_child(sig: int) -> None:
            self.check("signal")
            signal_group(sig)

        relay._output.push = push_out  # type: ignore[method-assign]
        child.signal_group = signal_child  # type: ignore[method-assign]


class Run:
    """One relay run against a MemoryChild, with the client's side for the test to drive."""

    def __init__(
        self,
        options: SessionOptions | None = None,
        *,
        fail_log: bool = False,
        stdin_broken: bool = False,
        child: MemoryChild | None = None,
        lockstep: bool = False,
    ) -> None:
        self.probe = Probe()
        options = options or SessionOptions(decision_sinks=(Sink.DECISION_LOG,), shutdown_grace=5.0)
        self.session = WrapSession(POLICY, options, clock=trio.current_time)
        self.child = child or MemoryChild(stdin_broken=stdin_broken)
        self.log = MemorySink("decision log", self.probe, fail=fail_log)
        self.to_wrap, client_in = trio.testing.memory_stream_one_way_pair()
        # lockstep: wrap's writes wait for the client to read them, as on a pipe that is full
        pair = trio.testing.lockstep_stream_one_way_pair if lockstep else trio.testing.memory_stream_one_way_pair
        client_out, self.from_wrap = pair()
        self.warnings: list[str] = []
        self.relay = Relay(
            [],
            self.session,
            client_in=client_in,
            client_out=client_out,
            sinks={Sink.DECISION_LOG: self.log},
            warn=self.warn,
            handle_signals=False,
            child=self.child,
        )
        self.probe.attach(self.relay, self.child)
        self.received = bytearray()
        self.result: RunResult | None = None

    def warn(self, line: str) -> None:
        self.probe.check("warning")
        self.warnings.append(line)

    async def main(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.child.serve)

        async def run() -> None:
            self.result = await self.relay.run()

        nursery.start_soon(run)

    async def answer(self, rid: int) -> dict:
        """The client reads until the answer to ``rid`` arrived."""
        while True:
            for line in bytes(self.received).splitlines():
                message = json.loads(line)
                if message.get("id") == rid:
                    return message
            data = await self.from_wrap.receive_some(65536)
            assert data, "wrap closed its output before the answer"
            self.received += data


@pytest.fixture
def autojump_clock():
    return trio.testing.MockClock(autojump_threshold=0)


async def test_allowed_call_reaches_the_server_denied_one_gets_the_deny_reply_eof_ends_the_run(autojump_clock):
    run = Run()
    async with trio.open_nursery() as nursery:
        await run.main(nursery)
        await run.to_wrap.send_all(frame(0, "initialize"))
        assert (await run.answer(0))["result"]["method"] == "initialize"
        await run.to_wrap.send_all(call(1, "echo") + call(2, "exec") + call(3, "echo"))
        allowed = await run.answer(1)
        assert allowed["result"]["params"]["name"] == "echo"
        denied = await run.answer(2)
        assert denied["result"]["isError"] is True
        assert "Content blocked by policy" in json.dumps(denied)
        assert (await run.answer(3))["result"]["params"]["name"] == "echo"
        await run.to_wrap.aclose()  # client EOF: wrap closes the child's stdin, the server exits 0
    assert [m["id"] for m in run.child.seen] == [0, 1, 3]  # the denied call never reached it
    assert run.result == RunResult(exit_code=0, stop_cause="client_eof", child_returncode=0)
    logged = [json.loads(line) for line in run.log.data.splitlines()]
    decisions = [e for e in logged if e["type"] == "assay.tool.decision"]
    assert len(decisions) == 3  # a decision event per tools/call, written before its effect
    assert [e["type"] for e in logged][
        0
    ] == "assay.client.capabilities"  # the initialize (docs/wrap-records.md, "The client")
    assert {"record", "reply"} <= set(run.probe.done)


async def test_child_exit_ends_the_run_with_the_childs_status(autojump_clock):
    run = Run()
    async with trio.open_nursery() as nursery:
        await run.main(nursery)
        await run.to_wrap.send_all(frame(0, "initialize"))
        await run.answer(0)
        await run.to_wrap.send_all(
            json.dumps({"jsonrpc": "2.0", "method": "quit", "params": {"code": 7}}).encode() + b"\n"
        )
    assert run.result is not None
    assert (run.result.exit_code, run.result.stop_cause, run.result.child_returncode) == (7, "child_exit", 7)
    assert run.child.signals == []  # it exited and closed its output: nothing to stop


async def test_a_record_that_cannot_be_written_stops_the_run_before_the_frame_takes_effect(autojump_clock):
    run = Run()
    async with trio.open_nursery() as nursery:
        await run.main(nursery)
        await run.to_wrap.send_all(frame(0, "initialize"))  # its client event is written
        await run.answer(0)
        run.log.fail = True  # then the disk fills up
        await run.to_wrap.send_all(call(1, "echo") + frame(2, "ping"))
    assert run.result is not None
    assert run.result.exit_code == 2 and run.result.stop_cause == "output_error"
    assert "cannot write decision log" in (run.result.fatal or "")
    assert [m["id"] for m in run.child.seen] == [0]  # fail closed: nothing of that read was forwarded
    assert run.child.stopped_running  # the stop after Finish found it running


async def test_a_child_that_stopped_reading_is_drained_then_terminated_on_the_timer(autojump_clock):
    """Writing to the child fails: the child-exit path; the child gets the grace period
    (the clock jumps), then SIGTERM, and the run ends with its status."""
    run = Run(stdin_broken=True)
    async with trio.open_nursery() as nursery:
        await run.main(nursery)
        start = trio.current_time()
        await run.to_wrap.send_all(frame(0, "initialize"))
    assert run.result is not None
    assert run.result.stop_cause == "child_exit"
    assert run.result.child_returncode == -signal.SIGTERM and run.result.exit_code == 128 + signal.SIGTERM
    assert run.child.signals == [signal.SIGTERM]
    assert trio.current_time() - start >= 5.0  # the shutdown grace passed on the fake clock


class LateAnswerChild(MemoryChild):
    """A server that answers its one request only at the end of its stdin, in 32 pieces of
    64 KiB on an output that waits for wrap to read it (a pipe's)."""

    def __init__(self) -> None:
        super().__init__()
        self._server_out, self.stdout = trio.testing.lockstep_stream_one_way_pair()

    async def _serve(self) -> None:
        got = b""
        while data := await self._server_in.receive_some(65536):
            got += data
        request = json.loads(got.split(b"\n")[0])
        self.seen.append(request)
        await self._server_out.send_all(b'{"jsonrpc":"2.0","id":%d,"result":{"text":"' % request["id"])
        for _ in range(32):
            await self._server_out.send_all(b"z" * 65536)
        await self._server_out.send_all(b'"}}\n')
        await self._exit(0)


@pytest.fixture
def manual_clock():
    return trio.testing.MockClock()


async def test_a_client_slow_to_read_after_its_end_does_not_cut_off_an_answering_server(manual_clock):
    """docs/wrap.md, "Lifecycle": after the client's end the grace counts the server's silence;
    a server blocked because wrap waits for a client slow to read its answer is not silent, so
    it is not stopped, and the answer arrives whole."""
    grace = 1.0
    # a line longer than wrap holds is streamed through as it comes (docs/wrap.md, "Output to
    # the client"), so the server waits for wrap, which waits for the client
    options = SessionOptions(decision_sinks=(Sink.DECISION_LOG,), shutdown_grace=grace, server_hold_limit=1 << 16)
    run = Run(options, child=LateAnswerChild(), lockstep=True)
    async with trio.open_nursery() as nursery:
        await run.main(nursery)
        await run.to_wrap.send_all(call(1, "echo"))
        await run.to_wrap.aclose()  # the client's end; it reads nothing for 10 grace periods
        await trio.testing.wait_all_tasks_blocked()  # wrap waits for the client, the server for wrap
        manual_clock.jump(10 * grace)
        await trio.testing.wait_all_tasks_blocked()  # a timer due now has fired
        assert run.child.signals == []  # not stopped
        while not run.received.endswith(b"\n"):  # the client reads at last
            run.received += await run.from_wrap.receive_some(1 << 20)
        manual_clock.autojump_threshold = 0  # the run's end may wait on the clock
    assert run.child.signals == []
    assert run.result == RunResult(exit_code=0, stop_cause="client_eof", child_returncode=0)
    answer = json.loads(bytes(run.received))
    assert answer["id"] == 1 and len(answer["result"]["text"]) == 32 * 65536


async def test_the_effect_runner_is_held_by_one_task_at_a_time(autojump_clock):
    """Client reads and server answers are performed by different tasks, concurrently; each
    list is performed by the task holding the runner, and never by two at once."""
    run = Run()
    performers: list[str] = []
    perform = run.relay._run

    async def counted(effects):
        owner = run.relay._runner.statistics().owner
        assert owner is trio.lowlevel.current_task()
        performers.append(owner.name.rsplit(".", 1)[-1])
        await perform(effects)
        assert run.relay._runner.statistics().owner is trio.lowlevel.current_task()  # taken back

    run.relay._run = counted  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        await run.main(nursery)
        await run.to_wrap.send_all(frame(0, "initialize"))
        await run.answer(0)
        for rid in range(1, 40):
            await run.to_wrap.send_all(call(rid, "exec" if rid % 3 == 0 else "echo"))
        for rid in range(1, 40):
            await run.answer(rid)
        await run.to_wrap.aclose()
    assert run.result is not None and run.result.exit_code == 0
    assert {"_client_pump", "_server_pump", "_child_watch"} <= set(performers), set(performers)
    # a list may wait on a peer without the runner (the child's stdin); no two lists are ever
    # performed with the runner held by both: checked at every effect by the probe
    assert run.probe.done.count("reply") >= 13
