"""The relay and an out-of-band approver (docs/serve.md, "Out-of-band approvers"): each
``AskApprover`` is asked of the relay's approver hook in a task of its own, its answer handed to
the session; the hook is cancelled at the call's deadline, when the call is settled otherwise
and with the run; no hook denies ``failed``. In memory, on trio's mock clock."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from assay.policy import load_policy
from assay.session.effects import AskApprover, Sink
from assay.session.session import SessionOptions, WrapSession
from assay.shells.stdio.relay import Relay

from tests.wrap.test_relay_memory import MemoryChild, MemorySink, Probe, frame

POLICY = load_policy(
    b'version: "2.0"\ntools:\n  allow: ["deploy", "echo"]\n  approval_required: ["deploy"]\n'
    b"  approval_timeout: 30s\nenforcement: {unconstrained_tools: allow}\n"
)


def deploy(rid: int) -> bytes:
    return frame(rid, "tools/call", name="deploy", arguments={"env": "prod"})


class Hook:
    """An approver hook the test answers: each ask waits for the test's word."""

    def __init__(self) -> None:
        self.asked: list[AskApprover] = []
        self.words: dict[str, str | BaseException | None] = {}  # None: never answers
        self.cancelled: list[str] = []
        self.withdrawn = trio.Event()  # set when an ask is cancelled
        self.changed = trio.Event()

    async def __call__(self, ask: AskApprover) -> str:
        self.asked.append(ask)
        self.changed.set()
        self.changed = trio.Event()
        try:
            while ask.approval_id not in self.words or self.words[ask.approval_id] is None:
                await self.changed.wait()
        except trio.Cancelled:
            self.cancelled.append(ask.approval_id)
            self.withdrawn.set()
            raise
        word = self.words[ask.approval_id]
        if isinstance(word, BaseException):
            raise word
        assert isinstance(word, str)
        return word

    def say(self, approval_id: str, word: str | BaseException | None) -> None:
        self.words[approval_id] = word
        self.changed.set()
        self.changed = trio.Event()

    async def wait_asked(self, n: int) -> AskApprover:
        while len(self.asked) < n:
            await self.changed.wait()
        return self.asked[n - 1]


class Run:
    def __init__(self, hook: Hook | None) -> None:
        self.session = WrapSession(
            POLICY,
            SessionOptions(approver="test", label="ops", decision_sinks=(Sink.DECISION_LOG,), shutdown_grace=5.0),
            clock=trio.current_time,
        )
        self.child = MemoryChild()
        self.probe = Probe()
        self.log = MemorySink("decision log", self.probe)
        self.to_wrap, client_in = trio.testing.memory_stream_one_way_pair()
        client_out, self.from_wrap = trio.testing.memory_stream_one_way_pair()
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
            approver=hook,
        )
        self.probe.attach(self.relay, self.child)  # every effect performed by the runner's holder
        self.received = bytearray()

    def warn(self, line: str) -> None:
        self.probe.check("warning")
        self.warnings.append(line)

    async def start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self.child.serve)
        nursery.start_soon(self.relay.run)
        await self.to_wrap.send_all(frame(0, "initialize"))
        await self.answer(0)

    async def answer(self, rid: int) -> dict:
        while True:
            for line in bytes(self.received).splitlines():
                message = json.loads(line)
                if message.get("id") == rid:
                    return message
            data = await self.from_wrap.receive_some(65536)
            assert data, "wrap closed its output before the answer"
            self.received += data

    def states(self) -> list[str]:
        events = [json.loads(x) for x in self.log.data.splitlines()]
        return [e["data"]["approval_state"] for e in events if e["type"] == "assay.tool.decision"]


@pytest.fixture
def autojump_clock():
    return trio.testing.MockClock(autojump_threshold=0)


def approval(answer: dict) -> str:
    return json.loads(answer["result"]["content"][1]["text"])["approval"]


async def test_the_hooks_answers_settle_the_held_calls(autojump_clock):
    hook = Hook()
    run = Run(hook)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(deploy(1) + deploy(2) + deploy(3))
        await hook.wait_asked(3)
        asks = sorted(hook.asked, key=lambda a: int(a.approval_id.rsplit("-", 1)[1]))  # tasks start in any order
        assert [a.tool for a in asks] == ["deploy"] * 3 and asks[0].server == "ops"
        assert asks[0].deadline == pytest.approx(trio.current_time() + 30, abs=1)
        hook.say(asks[1].approval_id, "decline")
        assert approval(await run.answer(2)) == "declined"
        hook.say(asks[0].approval_id, "accept")
        assert (await run.answer(1))["result"]["params"]["name"] == "deploy"  # the server ran it
        hook.say(asks[2].approval_id, RuntimeError("webhook down"))
        assert approval(await run.answer(3)) == "failed"
        await run.to_wrap.aclose()
    assert [m["id"] for m in run.child.seen] == [0, 1]
    assert sorted(run.states()) == ["approved", "declined", "failed"]
    assert run.warnings == ["[assay] the approver failed (RuntimeError): the call is denied"]
    assert run.relay._asking == {}


async def test_a_hook_that_never_answers_is_cancelled_at_the_deadline_and_the_call_denied(autojump_clock):
    hook = Hook()
    run = Run(hook)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        start = trio.current_time()
        await run.to_wrap.send_all(deploy(1))
        ask = await hook.wait_asked(1)
        assert approval(await run.answer(1)) == "timed_out"
        assert trio.current_time() - start == pytest.approx(30, abs=0.5)
        await run.to_wrap.aclose()
    assert hook.cancelled == [ask.approval_id]
    assert run.states() == ["timed_out"]


async def test_a_call_the_client_cancels_cancels_the_hook(autojump_clock):
    hook = Hook()
    run = Run(hook)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(deploy(1))
        ask = await hook.wait_asked(1)
        cancel = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        await run.to_wrap.send_all(cancel.encode() + b"\n")
        await hook.withdrawn.wait()
        assert hook.cancelled == [ask.approval_id]
        assert trio.current_time() < ask.deadline  # withdrawn at once, not at the deadline
        await run.to_wrap.aclose()
    assert run.states() == ["cancelled"]


async def test_without_a_hook_the_call_is_denied_failed(autojump_clock):
    run = Run(None)
    async with trio.open_nursery() as nursery:
        await run.start(nursery)
        await run.to_wrap.send_all(deploy(1))
        assert approval(await run.answer(1)) == "failed"
        await run.to_wrap.aclose()
    assert run.states() == ["failed"]
