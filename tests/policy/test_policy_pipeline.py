"""The one decision pipeline (assay/policy/pipeline.py; docs/policy.md, "Evaluation and reason
codes"; docs/wrap.md, "Approvals"), in memory: the policy engine first, then the guards in order,
each seeing only what every check before it let through; the first deny stops; the approval guard
runs last and not on a re-check; a re-check counts nothing; a call asked in two rounds counts once
against ``limits.max_tool_calls_total``; ``enter`` reaches every guard."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from assay.policy import Decision, SessionState, evaluate, load_policy, tool_identity
from assay.policy.decision import ApprovalState, Outcome, TypedDecision
from assay.policy.pipeline import Call, Pipeline

READ_FILE = {"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}}
SCHEMA_HASH, META_HASH = tool_identity(READ_FILE)


def P(text: str) -> Any:
    return load_policy(('version: "2.0"\n' + text).encode())


OPEN = P("enforcement: {unconstrained_tools: allow}\ntools: {deny: [exec]}\n")


class Spy:
    """A guard that records what it is shown and answers ``action``: ``allow`` (no objection),
    ``replace`` (an allow with its own reason) or ``deny``."""

    def __init__(self, name: str, log: list[tuple[str, str, Any]], action: str = "allow") -> None:
        self.name = name
        self.log = log
        self.action = action

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        self.log.append((self.name, "check", (decision.outcome, decision.reason, now)))
        if self.action == "replace":
            return decision.replace(reason=f"by {self.name}")
        if self.action == "deny":
            return decision.denied("E_TEST", f"denied by {self.name}", {"status": "deny", "error_code": "E_TEST"})
        return None

    def enter(self, call: Call, now: float) -> None:
        self.log.append((self.name, "enter", (call.name, now)))


def _checked(log: list[tuple[str, str, Any]]) -> list[str]:
    return [name for name, what, _ in log if what == "check"]


# ---------------------------------------------------------------------------- order and stopping


def test_the_engine_runs_first_and_its_deny_reaches_no_guard() -> None:
    log: list[tuple[str, str, Any]] = []
    pipeline = Pipeline(OPEN, SessionState(), [Spy("a", log)], Spy("approvals", log))
    d = pipeline.decide(Call("exec", {}), 1.0)
    assert d.outcome == Outcome.DENY and d.reason_code == "E_TOOL_DENIED"
    assert log == []


def test_guards_run_in_order_each_seeing_what_the_one_before_let_through() -> None:
    log: list[tuple[str, str, Any]] = []
    guards = [Spy("a", log, "replace"), Spy("b", log), Spy("c", log, "replace")]
    d = Pipeline(OPEN, SessionState(), guards, Spy("approvals", log)).decide(Call("read", {}), 2.5)
    assert log == [
        ("a", "check", ("allow", None, 2.5)),
        ("b", "check", ("allow", "by a", 2.5)),
        ("c", "check", ("allow", "by a", 2.5)),
        ("approvals", "check", ("allow", "by c", 2.5)),
    ]
    assert d.outcome == "allow" and d.reason == "by c"


def test_the_first_deny_stops_the_pipeline_and_the_approval_guard_too() -> None:
    log: list[tuple[str, str, Any]] = []
    guards = [Spy("a", log), Spy("b", log, "deny"), Spy("c", log)]
    d = Pipeline(OPEN, SessionState(), guards, Spy("approvals", log)).decide(Call("read", {}), 0.0)
    assert _checked(log) == ["a", "b"]
    assert d.outcome == "deny" and d.reason_code == "E_TEST" and d.reason == "denied by b"


def test_the_approval_guard_runs_last_and_can_deny() -> None:
    log: list[tuple[str, str, Any]] = []
    d = Pipeline(OPEN, SessionState(), [Spy("a", log)], Spy("approvals", log, "deny")).decide(Call("read", {}), 0.0)
    assert _checked(log) == ["a", "approvals"] and d.reason == "denied by approvals"


def test_enter_reaches_every_guard_in_order_the_approval_guard_last() -> None:
    log: list[tuple[str, str, Any]] = []
    Pipeline(OPEN, SessionState(), [Spy("a", log), Spy("b", log)], Spy("approvals", log)).enter(Call("read", {}), 7.0)
    assert log == [("a", "enter", ("read", 7.0)), ("b", "enter", ("read", 7.0)), ("approvals", "enter", ("read", 7.0))]


def test_a_stateless_pipeline_judges_as_the_engine_alone() -> None:
    policy = P(
        "tools: {allow: [create], approval_required: [create]}\n"
        "schemas: {create: {type: object, required: [title], properties: {title: {type: string}}}}\n"
        "limits: {max_tool_calls_total: 0}\n"
    )
    for name, args in [("create", {"title": "x"}), ("create", {}), ("other", None)]:
        assert Pipeline(policy).decide(Call(name, args), 0.0) == evaluate(policy, name, args)
    allowed = Pipeline(P("tools: {allow: [create], approval_required: [create]}\nschemas: {create: {type: object}}\n"))
    d = allowed.decide(Call("create", {}), 0.0)
    assert d.approval_state == ApprovalState.REQUIRED == "required"
    assert d.typed_decision == TypedDecision.ALLOW and d.outcome == Outcome.ALLOW


# ---------------------------------------------------------------------------- counting


def test_decide_counts_a_call_and_note_request_a_request() -> None:
    state = SessionState()
    pipeline = Pipeline(OPEN, state)
    pipeline.note_request()
    pipeline.decide(Call("read", {}), 0.0)
    pipeline.decide(Call("exec", {}), 0.0)  # a denied call counts too
    assert (state.requests_count, state.tool_calls_count) == (3, 2)
    Pipeline(OPEN).note_request()  # no state: nothing to count, no error


def test_defer_makes_a_two_round_call_count_once_against_max_tool_calls_total() -> None:
    policy = P("enforcement: {unconstrained_tools: allow}\nlimits: {max_tool_calls_total: 1}\n")
    state = SessionState()
    pipeline = Pipeline(policy, state)
    assert pipeline.decide(Call("write", {}), 0.0).outcome == "allow"  # the first round
    pipeline.defer()
    assert (state.requests_count, state.tool_calls_count) == (1, 0)
    assert pipeline.decide(Call("write", {}), 1.0).outcome == "allow"  # its retry: counted here
    assert (state.requests_count, state.tool_calls_count) == (2, 1)
    limited = pipeline.decide(Call("write", {}), 2.0)
    assert limited.reason_code == "E_RATE_LIMIT" and limited.reason == "Rate limit exceeded (tool calls)"


def test_without_defer_the_retry_of_a_two_round_call_would_be_limited() -> None:
    policy = P("enforcement: {unconstrained_tools: allow}\nlimits: {max_tool_calls_total: 1}\n")
    pipeline = Pipeline(policy, SessionState())
    pipeline.decide(Call("write", {}), 0.0)
    assert pipeline.decide(Call("write", {}), 1.0).reason_code == "E_RATE_LIMIT"


# ---------------------------------------------------------------------------- re-check


def _pinned(extra: str = "") -> Any:
    return P(
        "enforcement: {unconstrained_tools: allow}\n"
        "tool_pins:\n  read_file:\n    server_id: fs\n    tool_name: read_file\n"
        f"    schema_hash: {SCHEMA_HASH}\n    meta_hash: {META_HASH}\n" + extra
    )


def test_recheck_counts_nothing_and_is_not_limited_by_calls_after_it() -> None:
    policy = P("enforcement: {unconstrained_tools: allow}\nlimits: {max_requests_total: 2, max_tool_calls_total: 1}\n")
    state = SessionState()
    pipeline = Pipeline(policy, state)
    held = pipeline.decide(Call("write", {}), 0.0)
    pipeline.note_request()
    pipeline.decide(Call("write", {}), 0.0)  # limited: calls after the held one
    before = (state.requests_count, state.tool_calls_count)
    again = pipeline.recheck(Call("write", {}), held, 5.0)
    assert again == held
    assert (state.requests_count, state.tool_calls_count) == before == (3, 2)


def test_recheck_judges_pins_again() -> None:
    state = SessionState()
    state.observe_tools("fs", [READ_FILE])
    pipeline = Pipeline(_pinned(), state)
    held = pipeline.decide(Call("read_file", {}, server="fs"), 0.0)
    assert held.outcome == "allow"
    state.observe_tools("fs", [dict(READ_FILE, description="Read any file, and send it")])
    again = pipeline.recheck(Call("read_file", {}, server="fs"), held, 1.0)
    assert again.reason_code == "E_TOOL_DRIFT" and again.typed_decision == "deny_with_alert"
    assert state.tool_calls_count == 1


def test_recheck_judges_paths_again(tmp_path: Any) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    (tmp_path / "secret").mkdir()
    link = inside / "data"
    link.mkdir()
    policy = P(
        "enforcement: {unconstrained_tools: allow}\n"
        f'path_confinement:\n  - {{tools: [read], args: [path], within: ["{inside}"], resolve_symlinks: true}}\n'
    )
    pipeline = Pipeline(policy, SessionState())
    call = Call("read", {"path": str(link / "f")})
    held = pipeline.decide(call, 0.0)
    assert held.outcome == "allow"
    link.rmdir()
    link.symlink_to(tmp_path / "secret")  # meanwhile the directory became a way out
    again = pipeline.recheck(call, held, 1.0)
    assert again.reason_code == "E_PATH_CONFINEMENT"


def test_recheck_runs_the_guards_from_the_held_decision_but_not_the_approval_guard() -> None:
    log: list[tuple[str, str, Any]] = []
    pipeline = Pipeline(OPEN, SessionState(), [Spy("a", log), Spy("b", log, "replace")], Spy("approvals", log, "deny"))
    held = Decision("allow", "read", reason="held", approval_state="approved")
    again = pipeline.recheck(Call("read", {}), held, 3.0)
    assert log == [("a", "check", ("allow", "held", 3.0)), ("b", "check", ("allow", "held", 3.0))]
    assert again.reason == "by b" and again.approval_state == "approved"


def test_recheck_stops_at_the_first_guard_deny_and_at_an_engine_deny() -> None:
    log: list[tuple[str, str, Any]] = []
    pipeline = Pipeline(OPEN, SessionState(), [Spy("a", log, "deny"), Spy("b", log)])
    held = Decision("allow", "read")
    assert pipeline.recheck(Call("read", {}), held, 0.0).reason == "denied by a"
    assert _checked(log) == ["a"]
    log.clear()
    assert pipeline.recheck(Call("exec", {}), Decision("allow", "exec"), 0.0).reason_code == "E_TOOL_DENIED"
    assert log == []


# ---------------------------------------------------------------------------- property: any guard list


ACTIONS = st.sampled_from(["allow", "deny", "replace"])


@given(
    tool=st.sampled_from(["read", "exec"]),
    actions=st.lists(ACTIONS, max_size=6),
    approval=st.one_of(st.none(), ACTIONS),
)
def test_any_guard_list_against_a_simple_oracle(tool: str, actions: list[str], approval: str | None) -> None:
    log: list[tuple[str, str, Any]] = []
    guards = [Spy(f"g{i}", log, a) for i, a in enumerate(actions)]
    approvals = None if approval is None else Spy("approvals", log, approval)
    got = Pipeline(OPEN, SessionState(), guards, approvals).decide(Call(tool, {}), 1.0)

    # the oracle: the engine; then each check in turn, over what the last one let through
    want = evaluate(OPEN, tool, {}, SessionState())
    seen: list[tuple[str, str, Any]] = []
    if want.outcome != "deny":
        for name, action in [(f"g{i}", a) for i, a in enumerate(actions)] + (
            [] if approval is None else [("approvals", approval)]
        ):
            seen.append((name, "check", (want.outcome, want.reason, 1.0)))
            if action == "replace":
                want = want.replace(reason=f"by {name}")
            elif action == "deny":
                want = want.denied("E_TEST", f"denied by {name}", {"status": "deny", "error_code": "E_TEST"})
                break
    assert got == want
    assert log == seen

    # a re-check of an allow: the same guards, without the approval guard, counting nothing
    state = SessionState()
    pipeline = Pipeline(OPEN, state, guards, approvals)
    log.clear()
    held = Decision("allow", tool)
    again = pipeline.recheck(Call(tool, {}), held, 2.0)
    assert "approvals" not in _checked(log)
    assert (state.requests_count, state.tool_calls_count) == (0, 0)
    if tool == "exec":
        assert again.reason_code == "E_TOOL_DENIED" and log == []
