"""The client side on its own, in memory (docs/wrap.md, "Client frames"): framing, the fast
path, long lines admitted off the loop, the client's stream state and when the run becomes a
session. The judge is a stand-in that records what it was given."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.session import records
from assay.session.admission import RejectReason, admit
from assay.session.client_side import BIG_CLIENT_LINE, ClientSide, Reading, Start
from assay.session.effects import AdmitLine, Effect, StartSession, ToClient, ToServer, Warn
from assay.session.ledger import Ledger


class Judge:
    """Forwards everything except frames whose method is in ``refuse``."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.seen: list[tuple[dict[str, Any], bytes | None]] = []
        self.refuse = refuse

    def __call__(self, frame: dict[str, Any], out: list[Effect], raw: bytes | None) -> bool:
        self.seen.append((frame, raw))
        return frame.get("method") not in self.refuse


def side(refuse: tuple[str, ...] = (), released: list[bytes] | None = None, max_frame_bytes: int = 1 << 26):
    judge = Judge(refuse)
    recorder = records.Recorder(
        source="", label="x", dry_run=False, decision_log=False, audit_log=False, keep_events=False, verbose=False
    )
    ledger = Ledger(recorder, (), receipts=False)

    def reply(data: bytes, out: list[Effect]) -> None:
        out.append(ToClient(data))

    return ClientSide(judge, reply, released if released is not None else [], ledger, max_frame_bytes), judge


def line(method: str, rid: int | None = 1, **extra: Any) -> bytes:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **extra}
    if rid is not None:
        obj["id"] = rid
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def to_server(out: list[Effect]) -> bytes:
    return b"".join(e.data for e in out if isinstance(e, ToServer))


def test_the_first_frame_starts_the_session_and_server_discover_does_not():
    client, judge = side()
    out: list[Effect] = []
    client.receive(b"\n" + line("server/discover"), out)
    assert client.start is Start.DISCOVERING and not any(isinstance(e, StartSession) for e in out)
    client.receive(line("initialize", 2), out)
    assert client.start is Start.SESSION and client.started
    assert [type(e) for e in out] == [ToServer, StartSession, ToServer]
    assert [f["method"] for f, _ in judge.seen] == ["server/discover", "initialize"]


def test_a_rejected_line_starts_the_session_too_and_is_answered():
    client, judge = side()
    out: list[Effect] = []
    client.receive(b"[1]\n", out)
    assert client.start is Start.SESSION and judge.seen == []
    assert isinstance(out[0], StartSession) and isinstance(out[1], ToClient)
    assert out[2] == Warn(records.rejection_warning(RejectReason.BATCH))
    assert client.ledger.rejected == 1


def test_an_empty_stream_is_a_session_at_its_end():
    client, _ = side()
    out: list[Effect] = []
    assert client.close(out) is True and client.reading is Reading.CLOSED
    client.end(out)
    assert out == [StartSession()] and client.start is Start.SESSION


def test_the_fast_path_forwards_the_read_as_it_is():
    client, judge = side(refuse=("tools/call",))
    client.receive(line("initialize", 0), [])
    data = line("ping", 1) + line("ping", 2)
    out: list[Effect] = []
    client.receive(data, out)
    assert out == [ToServer(data)]
    assert [raw for _, raw in judge.seen[1:]] == [line("ping", 1)[:-1], line("ping", 2)[:-1]]  # the fast path's lines
    out = []
    client.receive(line("ping", 3) + line("tools/call", 4) + line("ping", 5), out)
    assert to_server(out) == line("ping", 3) + line("ping", 5)


def test_released_calls_go_in_the_place_of_the_frame_that_released_them():
    released: list[bytes] = []
    client, judge = side(refuse=("answer",), released=released)
    client.receive(line("initialize", 0), [])
    released.append(b'{"held":1}')
    out: list[Effect] = []
    client.receive(line("ping", 1) + line("answer", 2) + line("ping", 3), out)
    assert to_server(out) == line("ping", 1) + b'{"held":1}\n' + line("ping", 3) and released == []


def test_a_partial_line_waits_for_its_end():
    client, judge = side()
    client.receive(line("initialize", 0), [])
    whole = line("ping", 7)
    out: list[Effect] = []
    client.receive(whole[:10], out)
    assert out == []
    client.receive(whole[10:], out)
    assert to_server(out) == whole


def test_a_long_line_is_admitted_off_the_loop_and_the_queue_waits():
    client, judge = side()
    client.receive(line("initialize", 0), [])
    big = line("ping", 1, params={"pad": "x" * BIG_CLIENT_LINE})
    out: list[Effect] = []
    client.receive(big + line("ping", 2), out)
    assert [type(e) for e in out] == [AdmitLine] and client.reading is Reading.ADMITTING
    with pytest.raises(RuntimeError):
        client.receive(b"more\n", [])
    out = []
    assert client.admitted(admit(big), out, running=True) is False
    assert to_server(out) == big + line("ping", 2) and client.reading is Reading.LINES
    with pytest.raises(RuntimeError):
        client.admitted(None, [], running=True)


def test_the_end_waits_for_a_line_being_admitted():
    client, _ = side()
    client.receive(line("initialize", 0), [])
    big = line("ping", 1, params={"pad": "x" * BIG_CLIENT_LINE})
    client.receive(big, [])
    assert client.close([]) is False and client.reading is Reading.ADMITTING_AT_EOF
    out: list[Effect] = []
    assert client.admitted(admit(big), out, running=True) is True
    assert client.reading is Reading.CLOSED and to_server(out) == big


def test_a_verdict_after_the_run_stopped_is_dropped():
    client, judge = side()
    client.receive(line("initialize", 0), [])
    big = line("ping", 1, params={"pad": "x" * BIG_CLIENT_LINE})
    client.receive(big, [])
    out: list[Effect] = []
    assert client.admitted(admit(big), out, running=False) is False and out == []


@given(
    st.lists(
        st.sampled_from([line("ping", 1), line("tools/call", 2), b"\n", b"{bad\n", line("initialize", 3)]), max_size=8
    ),
    st.lists(st.integers(0, 400), max_size=4),
)
def test_any_cut_of_the_stream_judges_the_same_frames(frames: list[bytes], cuts: list[int]):
    data = b"".join(frames)
    whole, judge_whole = side()
    whole.receive(data, []) if data else None
    pieces, judge_pieces = side()
    at = 0
    for cut in sorted(c for c in cuts if c < len(data)):
        if data[at:cut]:
            pieces.receive(data[at:cut], [])
        at = cut
    if data[at:]:
        pieces.receive(data[at:], [])
    assert [f for f, _ in judge_whole.seen] == [f for f, _ in judge_pieces.seen]
    assert whole.start is pieces.start
