"""The guard registry (assay/policy/guards; docs/architecture.md, "Adding a guard"): a guard
added as one module and one line in the registry runs in wrap's session, in ``policy explain``
and in the server's ``assay_check_args``; the shared state is the guards' own, per guard name
(docs/wrap.md, "Shared sessions"), and a state stored in the earlier layout, the array
``[flows, rates, taint]``, still loads."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import SessionState, load_policy
from assay.policy.explain import explain
from assay.policy.guards import REGISTRY, GuardContext, Surface, build_guards
from assay.policy.pipeline import Call, Pipeline
from assay.policy.shared import SharedSession, part_of
from assay.policy.storeapi import MemoryStore, SessionKey
from tests.policy import _toy_guard

OPEN = 'version: "2.0"\nenforcement: {unconstrained_tools: allow}\n'
FLOWS = OPEN + (
    "sequences:\n  - {id: no-send, type: never_after, trigger: read_file, forbidden: send_mail}\n"
    "limits:\n  tools:\n    - {id: two, tools: [send_mail], max_calls: 2, per: 60s}\n"
)
TOY = "tests.policy._toy_guard"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The toy guard registered: one line in the registry."""
    monkeypatch.setattr("assay.policy.guards.REGISTRY", [*REGISTRY, TOY])
    _toy_guard.BUILT.clear()
    return _toy_guard.BUILT


def tool_call(i: int, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": {}}}


def test_a_registered_guard_runs_in_wraps_session(toy: list[str]) -> None:
    from tests.wrap._harness import Harness

    h = Harness(load_policy(OPEN.encode()))
    assert toy == ["wrap"]
    assert h.handle(tool_call(1, "echo")).disposition == "forwarded"
    blocked = h.handle(tool_call(2, "toy_blocked"))
    assert blocked.disposition == "blocked" and b"E_TOY" in (blocked.reply or b"")
    assert h.handle(tool_call(3, "toy_trigger")).disposition == "forwarded"  # entered: its state moves
    assert h.handle(tool_call(4, "echo")).disposition == "blocked"


def test_a_registered_guard_runs_in_policy_explain(toy: list[str]) -> None:
    policy = load_policy(OPEN.encode())
    assert explain(policy, "echo").verdict == "allow"
    got = explain(policy, "toy_blocked")
    assert got.decision.reason_code == "E_TOY" and got.verdict == "deny"
    assert toy and set(toy) == {"explain"}


def test_a_registered_guard_runs_in_the_servers_check(toy: list[str], tmp_path: Any) -> None:
    from assay.server.config import ServerConfig
    from assay.server.log import Logger
    from assay.server.protocol import ServerProtocol
    from tests.server._helpers import call

    (tmp_path / "p.yaml").write_text(OPEN)
    proto = ServerProtocol(str(tmp_path), ServerConfig(), Logger(None, "error"))

    def check(tool: str) -> dict[str, Any]:
        line = json.dumps(call(1, "assay_check_args", {"tool": tool, "arguments": {}, "policy": "p.yaml"})).encode()
        payload: dict[str, Any] = json.loads(json.loads(proto.handle_blocking(line))["result"]["content"][0]["text"])
        return payload

    assert check("echo")["allowed"] is True
    refused = check("toy_blocked")
    assert refused["allowed"] is False and "E_TOY" in json.dumps(refused)
    assert toy == ["check"]


def test_without_registration_nothing_of_it_runs() -> None:
    policy = load_policy(OPEN.encode())
    assert explain(policy, "toy_blocked").verdict == "allow"
    assert build_guards(GuardContext(policy, Surface.WRAP)).checks == ()


# ------------------------------------------------------------------------------ shared state


def wrap(policy: Any, store: MemoryStore, label: str = "s1") -> tuple[Pipeline, Any]:
    state = SessionState()
    built = build_guards(GuardContext(policy, Surface.WRAP, label, state, lambda: 1.0))
    shared = SharedSession(
        store, SessionKey("name:t", "named", name="t"), part_of(policy), label, state, built.parts, lambda: 1.0
    )
    return Pipeline(policy, state, built.checks, built.approvals, clock=lambda: 1.0, shared=shared), built


PROBLEMS: list[str] = []  # the store's failures judge() met, in order


def judge(pipeline: Pipeline, name: str, now: float) -> str | None:
    """One call as wrap's call path decides it in a shared session: the store's transaction
    loaded, the decision, the call entered (or not), the state saved. The deny's code, or None."""
    shared = pipeline.shared
    assert shared is not None
    store = shared.store
    assert isinstance(store, MemoryStore)
    problem = shared.loaded(store.begin_blocking(shared.key, shared.part, shared.server, now))
    call = Call(name, {}, "s1")
    decision = pipeline.decide(call, now, problem)
    if problem is not None:  # the state could not be read: the transaction ends unsaved
        PROBLEMS.append(problem)
        store.abort_blocking()
        return decision.reason_code
    entered = decision.outcome != "deny"
    if entered:
        pipeline.enter(call, now)
    saved = shared.saving(entered)
    assert shared.committed(saved, store.commit_blocking(saved, now)) is None
    return None if entered else decision.reason_code


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["read_file", "send_mail", "echo", "toy_trigger"]), max_size=8),
    st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_each_guards_state_round_trips_through_the_store(names: list[str], which: list[bool]) -> None:
    """Two wraps of one session (each with every guard, the toy too) decide as one wrap over the
    merged order: each guard's state goes through the store under its own name."""
    policy = load_policy(FLOWS.encode())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("assay.policy.guards.REGISTRY", [*REGISTRY, TOY])
        store = MemoryStore()
        a, built = wrap(policy, store)
        b, _ = wrap(policy, store)
        alone, _ = wrap(policy, MemoryStore())
        for i, (name, first) in enumerate(zip(names, which)):
            assert judge(a if first else b, name, 1.0 + i) == judge(alone, name, 1.0 + i)
        assert [p.name for p in built.parts] == ["rates", "flows", "toy"]
        blob = next(iter(store.parts.values())).state if store.parts else None
        if blob is not None:
            assert set(msgspec.msgpack.decode(blob)) == {"rates", "flows", "toy"}


def test_a_wrap_without_a_guard_keeps_that_guards_state() -> None:
    """A wrap with fewer guards over the same part reads the state and writes back the entries
    of the guards it does not have as it read them."""
    policy = load_policy(FLOWS.encode())
    store = MemoryStore()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("assay.policy.guards.REGISTRY", [*REGISTRY, TOY])
        a, _ = wrap(policy, store)
        assert judge(a, "toy_trigger", 1.0) is None
    b, _ = wrap(policy, store)  # no toy guard
    assert judge(b, "read_file", 2.0) is None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("assay.policy.guards.REGISTRY", [*REGISTRY, TOY])
        c, _ = wrap(policy, store)
        assert judge(c, "echo", 3.0) == "E_TOY"  # the toy's state survived b's commit
        assert judge(c, "send_mail", 4.0) == "E_SEQUENCE_VIOLATION"  # and b's read_file is there


def test_a_state_in_the_earlier_layout_still_loads() -> None:
    """A state written as the array ``[flows, rates, taint]`` (or ``[flows, rates]``) by the
    earlier version is read by position into the guards of those names."""
    policy = load_policy(FLOWS.encode())
    store = MemoryStore()
    old, built = wrap(policy, store)
    assert judge(old, "read_file", 1.0) is None
    assert judge(old, "send_mail", 2.0) == "E_SEQUENCE_VIOLATION"
    flows, rates = built.tracker("flows"), built.tracker("rates")
    (row,) = store.parts.values()
    for blob in (
        msgspec.msgpack.encode((flows.export_state(), rates.export_state(), None)),
        msgspec.msgpack.encode((flows.export_state(), rates.export_state())),
    ):
        row.state, row.version = blob, row.version + 1
        new, _ = wrap(policy, store)
        assert judge(new, "send_mail", 3.0) == "E_SEQUENCE_VIOLATION"  # read_file came before
        assert PROBLEMS == []
    row.state, row.version = msgspec.msgpack.encode(([9, "x"], None)), row.version + 1
    broken, _ = wrap(policy, store)
    assert judge(broken, "echo", 4.0) == "E_SESSION_STATE"  # flows that do not fit: refused, said
    assert len(PROBLEMS) == 1 and "session reset" in PROBLEMS.pop()
