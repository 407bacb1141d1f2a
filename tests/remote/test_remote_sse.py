"""The bounded event-stream decoder (docs/remote.md, "Answers and streams")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.remote.sse import Event, SSEDecoder, TooLong

EOLS = [b"\n", b"\r\n", b"\r"]
text = st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b)


@st.composite
def streams(draw):
    """(the bytes of a stream, the events a reader must get, the cap)."""
    cap = draw(st.integers(8, 120))
    parts: list[bytes] = []
    want: list[object] = []
    last_id = None
    for _ in range(draw(st.integers(0, 6))):
        eol = draw(st.sampled_from(EOLS))
        lines = draw(st.lists(text, min_size=1, max_size=4))
        kind = draw(st.sampled_from([None, b"message", b"endpoint"]))
        ident = draw(st.one_of(st.none(), st.text(alphabet="abc123", max_size=4)))
        if draw(st.booleans()):
            parts.append(b": a comment" + eol)
        if kind is not None:
            parts.append(b"event: " + kind + eol)
        if ident is not None:
            parts.append(b"id: " + ident.encode() + eol)
            last_id = ident
        for line in lines:
            parts.append(b"data: " + line + eol)
        parts.append(eol)
        size = sum(len(b"data: " + line) for line in lines) + len(lines) * 2
        data = b"\n".join(lines)
        if size > cap:
            want.append("too long")
        else:
            want.append(Event((kind or b"message").decode(), data, last_id))
    return b"".join(parts), want, cap


def _decode(stream: bytes, cuts: list[int], cap: int) -> list[object]:
    decoder = SSEDecoder(cap)
    got: list[object] = []
    start = 0
    for cut in sorted(cuts) + [len(stream)]:
        got += decoder.feed(stream[start:cut])
        start = cut
    return ["too long" if isinstance(e, TooLong) else e for e in got]


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(0, 2000), max_size=8))
def test_events_come_out_whatever_the_cuts(stream_want_cap, cuts):
    stream, want, cap = stream_want_cap
    cuts = [c for c in cuts if c <= len(stream)]
    # a generous cap: nothing is too long, and the cuts never change what comes out
    got = _decode(stream, cuts, 10**6)
    assert got == [w if isinstance(w, Event) else got[i] for i, w in enumerate(want)]
    assert all(isinstance(e, Event) for e in got)
    # the event's own cap: the over-long ones are reported in their place, the others intact
    bounded = _decode(stream, cuts, cap * 2)
    assert len(bounded) == len(want)
    for got_one, wanted in zip(bounded, want, strict=True):
        if got_one != "too long":
            assert isinstance(got_one, Event) and got_one.data == (wanted.data if isinstance(wanted, Event) else got_one.data)


def test_memory_stays_bounded_for_an_event_that_never_ends():
    decoder = SSEDecoder(1024)
    assert decoder.feed(b"data: ") == []
    for _ in range(1000):
        assert decoder.feed(b"x" * 4096) == []
        assert decoder.holding <= 1024
    assert decoder.feed(b"\n\n") == [TooLong(6 + 4096 * 1000)]
    assert decoder.feed(b"data: ok\n\n") == [Event("message", b"ok", None)]


def test_a_bom_a_cr_at_a_cut_and_an_event_without_data():
    decoder = SSEDecoder(100)
    assert decoder.feed(b"\xef\xbb\xbfevent: ping\r") == []
    assert decoder.feed(b"\n\r\ndata: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\r") == [Event("message", b"a\nb", None)]
    assert decoder.feed(b"id: 1\x002\n") == []  # an id with NUL is ignored
    assert decoder.feed(b"data:x\n\n") == [Event("message", b"x", None)]
