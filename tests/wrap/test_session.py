"""The wrap session in memory: bytes in, effects out, no processes (docs/wrap.md, "Lifecycle").

Covers the fast path for whole reads against the careful line-by-line path, the order of
effects (records before the frames they describe), session start, long lines admitted off the
event loop, server lines held whole, and every lifecycle path on a fake clock.
"""

from __future__ import annotations

import json
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policy import load_policy
from assay.session import client_side as client_side_mod, session as session_mod
from assay.session.admission import Admitted, admit, admit_region
from assay.session.effects import (
    AdmitLine,
    CloseServerInput,
    Finish,
    Phase,
    SignalChild,
    Sink,
    StartSession,
    StopCause,
    StopClient,
    ToClient,
    ToServer,
    Warn,
)
from assay.session.session import SessionOptions

from tests.wrap._harness import Harness

POLICY = load_policy(
    b'version: "2.0"\ntools:\n  allow: ["echo", "search"]\n  deny: ["exec"]\n'
    b"schemas:\n  search:\n    type: object\n    required: [q]\n    properties:\n      q: {type: string}\n"
)


def call(rid, name="echo", arguments=None) -> bytes:
    params = {"name": name, "arguments": arguments if arguments is not None else {"q": "x"}}
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}, separators=(",", ":")
        ).encode()
        + b"\n"
    )


def started(options: SessionOptions | None = None) -> Harness:
    h = Harness(POLICY, options or SessionOptions())
    effects = h.client(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n')
    assert effects.kinds()[0] == "StartSession" and effects.kinds()[-1] == "ToServer"
    return h


# -- the fast path ------------------------------------------------------------------------------


def test_a_read_of_allowed_frames_is_forwarded_as_one_slice():
    h = started()
    region = b"".join(call(i) for i in range(1, 50))
    effects = h.client(region)
    assert effects == [ToServer(region)]
    assert effects[0].data is region  # the read itself, not a copy
    assert h.counts["forwarded"] == 50


def test_a_denied_frame_in_a_read_is_cut_out_and_answered():
    h = started()
    frames = [call(1), call(2, "exec"), call(3), call(4, "search", {"q": 5})]
    effects = h.client(b"".join(frames))
    assert effects.to_server == frames[0] + frames[2]
    replies = [json.loads(line) for line in effects.to_client.splitlines()]
    assert [r["id"] for r in replies] == [2, 4]
    assert all(r["result"]["isError"] is True for r in replies)
    assert h.counts == {"forwarded": 3, "blocked": 2, "rejected": 0, "dropped": 0}


def test_partial_lines_are_held_across_reads():
    h = started()
    data = call(1) + call(2) + call(3)
    cut = len(call(1)) + 10
    first = h.client(data[:cut])
    assert first.to_server == call(1)
    second = h.client(data[cut:])
    assert second.to_server == call(2) + call(3)


def test_a_reads_records_come_with_its_frames_and_its_forwards_as_one_write():
    """Every evaluated call of a read has its records in the list, in frame order; the frames
    to forward come as one ToServer (the shell writes all of a list's records before any of
    its bytes, so no frame takes effect before its record is on disk)."""
    h = started(SessionOptions(decision_sinks=(Sink.DECISION_LOG,), audit=True, event_source="assay://t"))
    effects = h.client(call(1) + call(2) + call(3, "exec"))
    kinds = [(type(e).__name__, getattr(e, "sink", None)) for e in effects]
    assert kinds == [
        ("Record", Sink.DECISION_LOG),
        ("Record", Sink.AUDIT_LOG),
        ("Record", Sink.DECISION_LOG),
        ("Record", Sink.AUDIT_LOG),
        ("Record", Sink.DECISION_LOG),
        ("Record", Sink.AUDIT_LOG),
        ("ToClient", None),
        ("ToServer", None),
    ]
    assert effects[-1] == ToServer(call(1) + call(2))
    events = [json.loads(r) for r in effects.records(Sink.DECISION_LOG)]
    assert [e["data"]["decision"] for e in events] == ["allow", "allow", "deny"]
    assert [json.loads(r)["request_id"] for r in effects.records(Sink.AUDIT_LOG)] == [1, 2, 3]


def test_receipts_follow_their_frame():
    h = started(SessionOptions(receipts=True))
    effects = h.client(call(1) + call(2, "exec"))
    receipts = [json.loads(r) for r in effects.records(Sink.RECEIPTS)]
    assert [(r["request_id"], r["disposition"], r["seq"]) for r in receipts] == [(1, "forwarded", 2), (2, "blocked", 3)]
    assert effects.to_server == call(1)  # the shell writes receipts after the read's forwards


def stream_lines():
    good = st.sampled_from(
        [
            call(1),
            call(2, "exec"),
            call(3, "search", {"q": 1}),
            call("s", "search", {"q": "ok"}),
            b'{"jsonrpc":"2.0","method":"notifications/x"}\n',
            b'{"jsonrpc":"2.0","id":9,"result":{}}\n',
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"exec"}}\n',
        ]
    )
    bad = st.sampled_from(
        [
            b'{"a":1,"a":2}\n',
            b"[1]\n",
            b"\n",
            b"  \t\n",
            b'{"method":5}\n',
            b'{"x":NaN}\n',
            b'{"x":"\\ud800"}\n',
            b"\xff\n",
            b'{"a":1}\r\n',
            b'{"a":"b\\u003a","a":1}\n',
            b'{"a":' + b"[" * 130 + b"]" * 130 + b"}\n",
            b'{"a":' + b"9" * 400 + b"}\n",
            b"{\n",
            b'{"k":"x:y","k":"z"}\n',
            b'{"o":{"p":1,"p":2}}\n',
        ]
    )
    return st.lists(st.one_of(good, good, bad), min_size=1, max_size=25)


def effect_view(effects) -> tuple[bytes, bytes, list[str]]:
    return effects.to_server, effects.to_client, effects.warnings


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=stream_lines(), cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=6))
def test_property_fast_path_equals_the_careful_path(monkeypatch, lines, cuts):
    """Whatever the reads look like, the session does exactly what judging line by line with
    the careful reader does: same bytes forwarded, same replies, same warnings."""
    stream = b"".join(lines)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    fast = started()
    got = ([], [], [])
    for a, b in zip(points, points[1:]):
        if a < b:
            for part, view in zip(got, effect_view(fast.client(stream[a:b]))):
                part.append(view if isinstance(view, bytes) else "\n".join(view))
    careful = started()
    with monkeypatch.context() as m:
        m.setattr(client_side_mod, "admit_region", lambda region, lines: None)
        want = effect_view(careful.client(stream))
    assert b"".join(got[0]) == want[0]
    assert b"".join(got[1]) == want[1]
    assert [w for w in "\n".join(got[2]).split("\n") if w] == want[2]
    assert fast.counts == careful.counts


# -- admission: the fast reading agrees with the careful one ------------------------------------


def same_value(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=6,
)
fragments = st.sampled_from(
    [
        b"",
        b" ",
        b"\t",
        b"\\",
        b"\\u003a",
        b'"',
        b",",
        b":",
        b"{",
        b"}",
        b"[",
        b"]",
        b"0",
        b"01",
        b"1e999",
        b"-",
        b".",
        b"NaN",
        b"\\ud83d",
        b"\\ude00",
        b"\x00",
        b"\x7f",
        b"\xc3\xa9",
        b"\xed\xa0\x80",
        b"\x0b",
        b"\x0c",
        b"\r",
        b"9" * 310,
        b"true",
        b"nul",
        b'"method"',
        b'"a":1,"a":2',
    ]
)


@st.composite
def candidate_lines(draw):
    value = draw(st.dictionaries(st.text(max_size=5), json_values, max_size=5))
    text = json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        text = text[:at] + draw(fragments) + text[at + draw(st.integers(min_value=0, max_value=2)) :]
    return text.replace(b"\n", b"")


def check_fast_admission(lines: list[bytes]) -> bool:
    """Whatever the fast reading accepts, admit accepts with the same value; True when the
    fast reading took the lines."""
    region = b"".join(line + b"\n" for line in lines)
    frames = admit_region(region, list(lines))
    if frames is None:
        return False
    for line, frame in zip(lines, frames):
        verdict = admit(line + b"\n")
        assert isinstance(verdict, Admitted), (line, verdict)
        assert same_value(frame, verdict.frame), line
    return True


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(candidate_lines(), min_size=1, max_size=4))
def test_property_fast_admission_accepts_only_what_admit_accepts(lines):
    check_fast_admission(lines)


def test_seeded_fuzz_of_the_fast_admission():
    """Many more mutated frames than hypothesis can make in the time: bytes spliced into real
    frames at random places (a fixed seed, so a failure repeats)."""
    import random

    rng = random.Random(1234)
    pieces = [
        b"",
        b" ",
        b"\t",
        b"\\",
        b"\\u003a",
        b"\\u0041",
        b'"',
        b",",
        b":",
        b"{",
        b"}",
        b"[",
        b"]",
        b"0",
        b"01",
        b"-0",
        b"1e999",
        b"1.5e-400",
        b"-",
        b".",
        b"NaN",
        b"\\ud83d",
        b"\\ude00",
        b"\\ud83d\\ude00",
        b"\x00",
        b"\x1f",
        b"\x7f",
        b"\xc3\xa9",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xc0\xaf",
        b"\x0b",
        b"\x0c",
        b"\r",
        b"9" * 310,
        b"true",
        b"nul",
        b'"method"',
        b'"a":1,"a":2',
        b'"id"',
        b"1" * 20,
        b"\xef\xbb\xbf",
    ]
    bases = [
        call(i, name, arguments)[:-1]
        for i, (name, arguments) in enumerate(
            [
                ("echo", {"q": "x"}),
                ("search", {"q": "a:b", "n": [1, 2.5, -0.0, None, True, {"k": "v"}]}),
                ("exec", {}),
                ("x", {"deep": [[[{"a": [1]}]]], "s": "caf\u00e9 \u2603 \U0001f600"}),
            ]
        )
    ] + [b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":{"b":{"c":1}}}}', b'{"id":"s","result":{}}']
    taken = 0
    for _ in range(20000):
        line = rng.choice(bases)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(line))
            line = line[:at] + rng.choice(pieces) + line[at + rng.randint(0, 3) :]
        taken += check_fast_admission([line.replace(b"\n", b"")])
    assert taken > 1000  # the fast reading did take a good share of them


@pytest.mark.parametrize(
    "line",
    [
        b'{"a":1,"a":2}',
        b'{"a":{"b":1,"b":1}}',
        b'{"k":"x:y","k":"x:y"}',
        b'{"a":"\\u003a","a":1}',
        b'{"a":"\\u003a","a":"\\u003A"}',  # the escaped colons would make up for the lost member
        b'{"a":1}\r',
        b'{"a":' + b"[" * 129 + b"]" * 129 + b"}",
        b'{"a":' + b"9" * 309 + b"}",
        b'{"a":NaN}',
        b'{"a":"\\udc00"}',
        b'{"method":null}',
        b"[]",
        b"",
        b" ",
        b'{"a":1} {"b":2}',
    ],
)
def test_fast_admission_leaves_every_hard_line_to_the_careful_reader(line):
    assert admit_region(line + b"\n", [line]) is None


def test_fast_admission_reads_an_ordinary_frame():
    line = call(7, "search", {"q": "a:b", "n": [1, 2.5, None, True]})[:-1]
    assert admit_region(line + b"\n", [line]) == [json.loads(line)]


# -- session start ------------------------------------------------------------------------------


def test_server_discover_does_not_start_the_session_the_next_frame_does():
    h = Harness(POLICY)
    discover = b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}\n'
    first = h.client(discover)
    assert first.kinds() == ["ToServer"] and not h.started
    second = h.client(call(2))
    assert second.kinds() == ["StartSession", "ToServer"] and h.started


def test_start_session_comes_after_the_frames_before_it_in_the_same_read():
    h = Harness(POLICY)
    discover = b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}\n'
    effects = h.client(discover + call(2))
    assert effects == [ToServer(discover), StartSession(), ToServer(call(2))]


def test_a_rejected_first_frame_starts_the_session_and_blank_lines_do_not():
    h = Harness(POLICY)
    assert h.client(b"\n \t\n") == []
    effects = h.client(b"[1]\n")
    assert effects.kinds() == ["StartSession", "ToClient", "Warn"]
    assert h.counts["rejected"] == 1


def test_an_empty_client_stream_is_a_session():
    h = Harness(POLICY)
    assert h.client_closed() == [StartSession(), CloseServerInput()]
    assert h.stop_cause is StopCause.CLIENT_EOF


def test_client_eof_after_only_blank_lines_is_not_a_session_start():
    h = Harness(POLICY)
    h.client(b"\n")
    # a blank line is not a frame: the EOF still makes an empty stream a session
    assert h.client_closed() == [StartSession(), CloseServerInput()]


def test_the_unterminated_last_line_counts_at_eof():
    h = started()
    assert h.client(call(5)[:-1]) == []
    assert h.client_closed() == [ToServer(call(5)[:-1]), CloseServerInput()]


# -- long lines ---------------------------------------------------------------------------------


def test_a_long_line_is_admitted_off_the_loop_and_the_queue_waits_for_it():
    h = started()
    long = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"q":"'
        + b"x" * (1 << 20)
        + b'"}}}\n'
    )
    effects = h.session.receive_client_data(call(0) + long + call(2))
    assert effects == [ToServer(call(0)), AdmitLine(long)]
    with pytest.raises(RuntimeError):
        h.session.receive_client_data(call(3))
    assert h.session.client_closed() == []  # the EOF waits for the verdict too
    rest = h.session.admitted(admit(long))
    assert rest == [ToServer(long + call(2)), CloseServerInput()]


# -- server lines -------------------------------------------------------------------------------


def test_server_lines_are_held_whole_and_forged_answers_cut_out():
    h = started()
    h.client(call(1) + call(2))
    answer1 = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    forged = b'{"jsonrpc":"2.0","id":77,"result":{}}\n'
    answer2 = b'{"jsonrpc":"2.0","id":2,"result":{}}\n'
    data = answer1 + forged + answer2
    assert h.server(data[:10]) == []
    effects = h.server(data[10:])
    assert effects.to_client == answer1 + answer2
    assert effects.warnings == [
        "[assay] WARNING: dropped a server response (id 77) that answers no pending client request"
    ]
    assert h.dropped_responses == 1


def test_replies_wait_while_a_long_server_line_is_streamed():
    h = started(SessionOptions(server_hold_limit=1000))
    head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + b"y" * 1200
    assert h.server(head) == [ToClient(head)]
    deny = h.client(call(3, "exec"))
    assert deny.to_client == b""  # not in the middle of the server's line
    held = h.session.held_bytes  # the shell stops reading the client past its bound
    end = h.server(b'"}}\n{"jsonrpc":"2.0","method":"n"}\n')
    assert held == len(end.to_client) - len(b'"}}\n{"jsonrpc":"2.0","method":"n"}\n') > 0
    assert h.session.held_bytes == 0
    assert end.to_client.startswith(b'"}}\n{"jsonrpc":"2.0","id":3,"result"')
    assert end.to_client.endswith(b'{"jsonrpc":"2.0","method":"n"}\n')


def test_an_unterminated_last_server_line_is_relayed_at_eof():
    h = started()
    h.server(b'{"partial":')
    assert h.session.server_closed() == [ToClient(b'{"partial":')]


# -- lifecycle ----------------------------------------------------------------------------------


def test_client_eof_then_grace_then_sigterm_then_sigkill():
    h = started(SessionOptions(shutdown_grace=1.0))
    s = h.session
    assert h.client_closed() == [CloseServerInput()]
    assert s.phase is Phase.DRAINING and s.deadline == h.clock.now + 1.0
    h.clock.advance(0.5)
    assert s.timer() == []  # early: nothing
    h.clock.advance(0.5)
    assert s.timer() == [SignalChild(signal.SIGTERM)]
    assert s.deadline == h.clock.now + 0.5
    h.clock.advance(0.5)
    assert s.timer() == [SignalChild(signal.SIGKILL)]
    assert s.deadline is None
    assert s.child_exited(-9) == [
        Warn(
            "[assay] the server died of signal 9 (SIGKILL): wrap stopped it, since it did not exit within "
            "--shutdown-grace of the client's end; 1 request(s) it had not answered get no answer"
        ),
        StopClient(),
    ]
    assert s.server_closed() == [Finish(drain=True)]
    assert s.exit_code(-9) == 137 and s.stop_cause is StopCause.CLIENT_EOF


def test_a_server_still_answering_keeps_its_grace():
    h = started(SessionOptions(shutdown_grace=1.0))
    s = h.session
    h.client(call(1) + call(2))
    h.client_closed()
    h.clock.advance(0.9)
    h.server(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')  # it answers: the grace counts from here
    h.clock.advance(0.9)
    assert s.timer() == []
    h.server(b'{"jsonrpc":"2.0","id":2,"result":{}}\n')  # the last answer, nothing owed now
    assert s.deadline == h.clock.now + 1.0  # the grace after the last answer is never cut short
    h.clock.advance(1.0)
    assert s.timer() == [SignalChild(signal.SIGTERM)]


def test_output_while_nothing_is_owed_does_not_extend_the_grace():
    h = started(SessionOptions(shutdown_grace=1.0))
    s = h.session
    h.server(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')  # initialize answered: nothing is owed
    assert not s.owes_answers
    h.clock.advance(0.1)
    h.client_closed()
    eof = h.clock.now
    h.clock.advance(0.8)
    h.server(b'{"jsonrpc":"2.0","method":"notifications/message"}\n')
    assert s.deadline == eof + 1.0


def test_child_exit_first_delivers_everything_then_finishes():
    h = started()
    s = h.session
    h.client(call(1))
    assert s.child_exited(0) == [
        Warn("[assay] the server exited with status 0; 2 request(s) it had not answered get no answer"),
        StopClient(),
    ]
    assert s.phase is Phase.CHILD_EXITED
    assert h.client(call(2)) == []  # the client is no longer read
    assert h.server(b'{"jsonrpc":"2.0","id":1,"result":{}}\n').to_client.startswith(b'{"jsonrpc"')
    assert s.server_closed() == [Finish(drain=True)]
    assert s.exit_code(0) == 0 and s.stop_cause is StopCause.CHILD_EXIT


def test_the_end_of_a_stdio_server_is_one_line_unless_wrap_or_the_client_ended_it():
    # docs/wrap.md, "Lifecycle": as a remote server's loss is (docs/remote.md)
    ended = "[assay] the server died of signal 11 (SIGSEGV)"
    h = started()
    h.server(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    assert h.session.child_exited(-11) == [Warn(ended), StopClient()]  # on its own, nothing owed
    h = started()
    h.client_closed()
    assert h.session.child_exited(0) == [StopClient()]  # the client's end, a clean exit: nothing to say
    h = started()
    h.client_closed()
    assert h.session.child_exited(2) == [
        Warn("[assay] the server exited with status 2; 1 request(s) it had not answered get no answer"),
        StopClient(),
    ]
    h = started()
    h.session.signal(signal.SIGTERM)
    assert h.session.child_exited(-15) == []  # wrap's own stop
    h = started(SessionOptions(announce_exit=False))  # a remote server says why it was lost itself
    assert h.session.child_exited(1) == [StopClient()]


def test_the_exit_line_names_every_end():
    from assay.session.records import server_exit_line

    assert (
        server_exit_line(None, stopped=False, unanswered=0) == "[assay] the server ended (its exit status is unknown)"
    )
    assert server_exit_line(-200, stopped=False, unanswered=0) == "[assay] the server died of signal 200 (unknown)"
    assert server_exit_line(1, stopped=False, unanswered=3).endswith("; 3 request(s) it had not answered get no answer")


def test_a_silent_descendant_holding_stdout_is_killed_after_the_grace():
    h = started(SessionOptions(shutdown_grace=0.5))
    s = h.session
    s.child_exited(0)
    assert s.deadline == s.last_output + 0.5
    h.clock.advance(0.5)
    assert s.timer() == [SignalChild(signal.SIGKILL)]
    assert s.deadline is None
    assert s.server_closed() == [Finish(drain=True)]


def test_a_descendant_still_writing_is_not_killed():
    h = started(SessionOptions(shutdown_grace=0.5))
    s = h.session
    s.child_exited(0)
    for _ in range(5):
        h.clock.advance(0.4)
        h.server(b'{"jsonrpc":"2.0","method":"n"}\n')
        assert s.timer() == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_child_and_exits_128_plus_n(signum):
    h = started()
    s = h.session
    assert s.signal(signum) == [StopClient(), SignalChild(signal.SIGTERM)]
    assert s.signal(signum) == []  # once
    h.clock.advance(0.5)
    assert s.timer() == [SignalChild(signal.SIGKILL)]
    assert s.child_exited(-9) == []
    h.clock.advance(0.5)
    assert s.timer() == [Finish(drain=False)]
    assert s.exit_code(-9) == 128 + signum and s.stop_cause is StopCause.SIGNAL


def test_a_signal_after_the_child_exited_caps_the_delivery():
    h = started()
    s = h.session
    s.child_exited(3)
    assert s.signal(signal.SIGTERM)[0] == StopClient()
    assert s.server_closed() == [Finish(drain=True, deadline=h.clock.now + 0.5)]
    assert s.stop_cause is StopCause.CHILD_EXIT and s.exit_code(3) == 143


def test_the_child_stopping_to_read_is_the_child_exit_path():
    h = started(SessionOptions(shutdown_grace=1.0))
    s = h.session
    assert s.server_input_closed() == [StopClient(), CloseServerInput()]
    assert s.stop_cause is StopCause.CHILD_EXIT and s.phase is Phase.DRAINING
    assert s.client_closed() == []  # already on its way out


def test_a_failed_record_is_fatal_exit_2():
    h = started()
    s = h.session
    assert s.output_failed("cannot write decision log: No space left on device") == [
        StopClient(),
        Finish(drain=True, deadline=h.clock.now + 5.0),
    ]
    assert s.exit_code(0) == 2 and s.stop_cause is StopCause.OUTPUT_ERROR
    assert s.is_session


def test_outputs_that_cannot_be_created_make_no_session():
    h = Harness(POLICY)
    assert h.client(call(1)).kinds() == ["StartSession", "ToServer"]
    h.session.start_failed("--session-stop-out x was created by someone else")
    assert not h.session.is_session and h.session.exit_code(0) == 2


def test_the_client_going_away_ends_the_run_at_once():
    h = started()
    assert h.session.client_lost() == [StopClient(), Finish(drain=False)]
    assert h.session.stop_cause is StopCause.CLIENT_EOF


@pytest.mark.parametrize(
    ("rc", "sig", "code"), [(0, None, 0), (3, None, 3), (-15, None, 143), (None, None, 2), (0, 2, 130)]
)
def test_exit_status(rc, sig, code):
    assert session_mod.exit_status(rc, sig) == code


def test_the_session_does_no_io():
    """The sans-IO core imports neither trio nor anything that opens files."""
    import ast
    import pathlib

    for name in (
        "session",
        "assembly",
        "effects",
        "admission",
        "pending",
        "listing",
        "serverlines",
        "client_side",
        "server_side",
        "toolbook",
        "calls",
        "ledger",
        "lifecycle",
        "approvals/room",
        "approvals/held",
        "approvals/offers",
    ):
        source = (pathlib.Path(session_mod.__file__).parent / f"{name}.py").read_text()
        imported = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert not imported & {"trio", "os", "subprocess", "socket", "io"}, (name, imported)


def test_effects_of_different_kinds_are_never_equal():
    assert ToServer(b"x") != ToClient(b"x")
    assert StartSession() != StopClient() != CloseServerInput()
    assert Finish() == Finish(drain=True) and Finish() != Finish(drain=False)
