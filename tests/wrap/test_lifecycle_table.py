"""The lifecycle as one table (docs/wrap.md, "Lifecycle"): every (phase, event) pair, in memory,
and event sequences over a whole session: the phase never goes back and Finish comes once."""

from __future__ import annotations

import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.session.effects import CloseServerInput, Finish, Phase, SignalChild, StopCause, StopClient
from assay.session.lifecycle import (
    FATAL_FLUSH_S,
    KILL_AFTER_TERM_S,
    SIGNAL_DRAIN_S,
    TABLE,
    Child,
    Do,
    LifeEvent,
    Lifecycle,
    exit_status,
)
from assay.session.session import SessionOptions, WrapSession

P, E = Phase, LifeEvent
ORDER = list(Phase)  # the phases in the order a run goes through them
NOW = 100.0

# What each pair does, written out (the table must say exactly this): next phase, cause, steps,
# deadline offset. Pairs not listed change nothing.
LIVE = (P.RUNNING, P.DRAINING, P.TERMINATING, P.KILLED)
EXPECTED: dict[tuple[Phase, LifeEvent], tuple[Phase, StopCause | None, tuple[Do, ...], float | None]] = {
    (P.RUNNING, E.CLIENT_EOF): (P.DRAINING, StopCause.CLIENT_EOF, (Do.ABANDON, Do.CLOSE_SERVER_INPUT), None),
    (P.RUNNING, E.SERVER_INPUT_CLOSED): (
        P.DRAINING,
        StopCause.CHILD_EXIT,
        (Do.ABANDON, Do.STOP_CLIENT, Do.CLOSE_SERVER_INPUT),
        None,
    ),
    (P.DRAINING, E.TIMER): (P.TERMINATING, None, (Do.TERM,), KILL_AFTER_TERM_S),
    (P.TERMINATING, E.TIMER): (P.KILLED, None, (Do.KILL,), None),
    (P.CHILD_EXITED, E.TIMER): (P.CHILD_EXITED, None, (Do.KILL_SILENT,), None),
    (P.SIGNALLED, E.TIMER): (P.SIGNAL_DRAIN, None, (Do.KILL,), SIGNAL_DRAIN_S),
    (P.SIGNAL_DRAIN, E.TIMER): (P.DONE, None, (Do.FINISH_NOW,), None),
    (P.CHILD_EXITED, E.SERVER_EOF): (P.DONE, None, (Do.FINISH,), None),
    (P.SIGNAL_DRAIN, E.SERVER_EOF): (P.DONE, None, (Do.FINISH_BY_DEADLINE,), None),
    (P.SIGNALLED, E.CHILD_EXIT): (P.SIGNAL_DRAIN, None, (), SIGNAL_DRAIN_S),
    (P.SIGNALLED, E.CHILD_EXIT_AT_EOF): (P.DONE, None, (Do.FINISH_BY_DEADLINE,), SIGNAL_DRAIN_S),
}
for p in LIVE:
    EXPECTED[p, E.CHILD_EXIT] = (P.CHILD_EXITED, StopCause.CHILD_EXIT, (Do.ABANDON, Do.STOP_CLIENT), None)
    EXPECTED[p, E.CHILD_EXIT_AT_EOF] = (P.DONE, StopCause.CHILD_EXIT, (Do.ABANDON, Do.STOP_CLIENT, Do.FINISH), None)
for p in (*LIVE, P.CHILD_EXITED):
    signalled = (Do.STOP_CLIENT, Do.TERM, Do.ABANDON)
    EXPECTED[p, E.SIGNAL] = (P.SIGNALLED, StopCause.SIGNAL, signalled, KILL_AFTER_TERM_S)
    EXPECTED[p, E.SIGNAL_CHILD_GONE] = (P.SIGNAL_DRAIN, StopCause.SIGNAL, signalled, SIGNAL_DRAIN_S)
    EXPECTED[p, E.SIGNAL_ALL_GONE] = (P.DONE, StopCause.SIGNAL, (*signalled, Do.FINISH_BY_DEADLINE), SIGNAL_DRAIN_S)
for p in Phase:
    if p is not P.DONE:
        EXPECTED[p, E.CLIENT_LOST] = (P.DONE, StopCause.CLIENT_EOF, (Do.ABANDON, Do.STOP_CLIENT, Do.FINISH_NOW), None)
        EXPECTED[p, E.OUTPUT_FAILED] = (
            P.DONE,
            StopCause.OUTPUT_ERROR,
            (Do.DISCARD, Do.STOP_CLIENT, Do.FINISH_BY_DEADLINE),
            FATAL_FLUSH_S,
        )


def test_the_table_is_what_the_lifecycle_says():
    assert {k: (r.next, r.cause, r.steps, r.deadline) for k, r in TABLE.items()} == EXPECTED


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("event", list(LifeEvent))
def test_every_phase_event_pair(phase: Phase, event: LifeEvent):
    life = Lifecycle(0.0, 1.0)
    life.phase = phase
    life.child = Child.EXITED  # refine() leaves an already refined event as it is
    if event in (E.CHILD_EXIT, E.SIGNAL):
        life.child = Child.RUNNING  # the unrefined forms: the child runs, its stdout is open
    steps = life.fire(event, NOW)
    want = EXPECTED.get((phase, event))
    if want is None:
        assert steps is None and life.phase is phase and life.stop_cause is None
        return
    nxt, cause, want_steps, offset = want
    assert steps == want_steps and life.phase is nxt and life.stop_cause is cause
    if offset is not None:
        assert life._deadline == NOW + offset
    assert ORDER.index(nxt) >= ORDER.index(phase), "the phase never goes back"
    if nxt is P.DRAINING:
        assert life.deadline() == NOW + 1.0  # the grace counts from the client's end


def test_refine_reads_the_facts():
    life = Lifecycle(0.0, 1.0)
    assert life.refine(E.CHILD_EXIT) is E.CHILD_EXIT and life.refine(E.SIGNAL) is E.SIGNAL
    life.server_eof = True
    assert life.refine(E.CHILD_EXIT) is E.CHILD_EXIT_AT_EOF
    life.child_exited(0)
    assert life.refine(E.SIGNAL) is E.SIGNAL_ALL_GONE
    life.server_eof = False
    assert life.refine(E.SIGNAL) is E.SIGNAL_CHILD_GONE


def test_the_first_cause_wins_and_steps_become_effects():
    life = Lifecycle(0.0, 1.0)
    life.fire(E.CLIENT_EOF, 1.0)
    life.fire(E.SIGNAL, 2.0)
    assert life.stop_cause is StopCause.CLIENT_EOF and life.phase is P.SIGNALLED
    assert life.effect(Do.TERM) == SignalChild(signal.SIGTERM)
    assert life.effect(Do.STOP_CLIENT) == StopClient() and life.effect(Do.CLOSE_SERVER_INPUT) == CloseServerInput()
    assert life.effect(Do.FINISH_BY_DEADLINE) == Finish(drain=True, deadline=2.0 + KILL_AFTER_TERM_S)
    with pytest.raises(ValueError):
        life.effect(Do.ABANDON)


def test_a_silent_descendant_is_killed_once():
    life = Lifecycle(0.0, 1.0)
    life.child_exited(0)
    life.fire(E.CHILD_EXIT, 1.0)
    assert life.deadline() == 1.0  # the last output (0.0) + the grace
    (step,) = life.fire(E.TIMER, 1.0) or ()
    assert life.child is Child.SILENCED and life.effect(step) == SignalChild(signal.SIGKILL)
    assert life.deadline() is None


def test_no_silence_is_counted_while_a_write_waits_for_the_client():
    # docs/wrap.md, "Lifecycle": wrap reads nothing of the server while it waits for a client
    # slow to read, so the server's silence then is wrap's own
    life = Lifecycle(0.0, 1.0)
    life.fire(E.CLIENT_EOF, 1.0)
    life.output_seen(1.5, owes_answers=True)
    assert life.deadline() == 2.5
    life.delivery(1.6, busy=True, owes_answers=True)
    assert life.deadline() is None  # the server owes answers and waits for wrap
    life.delivery(9.0, busy=False, owes_answers=True)
    assert life.deadline() == 10.0  # the grace counts from the write's end
    life.delivery(9.5, busy=True, owes_answers=False)
    assert life.deadline() == 10.0  # owing nothing, the server's silence counts as before
    life.delivery(20.0, busy=False, owes_answers=False)
    assert life.deadline() == 10.0
    # the server exited: its end of output is awaited, not while a write waits for the client
    gone = Lifecycle(0.0, 1.0)
    gone.child_exited(0)
    gone.fire(E.CHILD_EXIT, 1.0)
    assert gone.deadline() == 1.0
    gone.delivery(0.5, busy=True, owes_answers=False)
    assert gone.deadline() is None
    gone.delivery(7.0, busy=False, owes_answers=False)
    assert gone.deadline() == 8.0


@pytest.mark.parametrize(
    ("rc", "sig", "code"), [(0, None, 0), (3, None, 3), (-9, None, 137), (None, None, 2), (0, 15, 143)]
)
def test_exit_status(rc, sig, code):
    assert exit_status(rc, sig) == code


# -- whole sessions: any order of events -----------------------------------------------------

POLICY = load_policy(b'version: "2.0"\ntools:\n  allow: ["echo"]\n')


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


EVENTS = st.lists(
    st.sampled_from(
        [
            "client_closed",
            "client_lost",
            "server_closed",
            "server_input_closed",
            "child_exited",
            "signal",
            "timer",
            "output_failed",
            "tick",
            "server_data",
            "client_data",
        ]
    ),
    max_size=14,
)


@given(EVENTS)
def test_the_phase_never_goes_back_and_finish_comes_once(events: list[str]):
    clock = Clock()
    s = WrapSession(POLICY, SessionOptions(), clock=clock)
    finishes = 0
    last = ORDER.index(s.phase)
    for name in events:
        before = s.phase
        if name == "tick":
            clock.now += 0.7
            continue
        if name == "timer":
            clock.now = max(clock.now, s.deadline or clock.now)
            effects = s.timer()
        elif name == "signal":
            effects = s.signal(signal.SIGTERM)
        elif name == "child_exited":
            effects = s.child_exited(0)
        elif name == "output_failed":
            effects = s.output_failed("disk full")
        elif name == "server_data":
            effects = s.receive_server_data(b'{"jsonrpc":"2.0","method":"notifications/x"}\n')
        elif name == "client_data":
            effects = s.receive_client_data(
                b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}\n'
            )
        else:
            effects = getattr(s, name)()
        finishes += sum(isinstance(e, Finish) for e in effects)
        if before is Phase.DONE:
            assert not [e for e in effects if not isinstance(e, (Finish,))] or name == "server_data"
        index = ORDER.index(s.phase)
        assert index >= last, f"{before} -> {s.phase} on {name}"
        last = index
        if any(isinstance(e, Finish) for e in effects):
            assert s.phase is Phase.DONE
    assert finishes <= 1
    assert (finishes == 1) == (s.phase is Phase.DONE)
