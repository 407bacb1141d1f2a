"""The bounded event-stream decoder (docs/remote.md, "Answers and streams")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.shells.upstream_http.sse import Event, SSEDecoder, TooLong

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
            assert isinstance(got_one, Event) and got_one.data == (
                wanted.data if isinstance(wanted, Event) else got_one.data
            )


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


def test_the_last_id_counts_once_its_event_is_whole():
    """docs/remote.md, "Answers and streams": a stream cut in the middle of an event resumes
    from the event before it (the HTML standard sets the last event id at the blank line)."""
    decoder = SSEDecoder(100)
    assert decoder.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b\n") == [Event("message", b"a", "1")]
    assert decoder.last_id == "1"  # event 2 has not ended: a resumption must ask for it again
    assert decoder.feed(b"\n") == [Event("message", b"b", "2")]
    assert decoder.last_id == "2"
    assert decoder.feed(b"id: 3\n\n") == [] and decoder.last_id == "3"  # an id alone counts too
    assert SSEDecoder(100, last_id="7").last_id == "7"  # a resumed stream carries on


def test_retry_takes_ascii_digits_only():
    decoder = SSEDecoder(10000)
    for line, want in [
        (b"retry: 250", 250),
        (b"retry: 25x", 250),
        (b"retry: -1", 250),
        (b"retry:+5", 250),
        (b"retry: \xd9\xa3", 250),
        (b"retry:0", 0),
        (b"retry: " + b"9" * 5000, 10**9),
    ]:
        decoder.feed(line + b"\n")
        assert decoder.retry_ms == want, line[:20]


def test_a_long_data_line_in_pieces_comes_out_whole():
    decoder = SSEDecoder(1 << 20)
    pieces = [b"da", b"ta", b":", b" x" + b"y" * 70000, b"z" * 70000, b"\n", b"\n"]
    got = [event for piece in pieces for event in decoder.feed(piece)]
    assert got == [Event("message", b"x" + b"y" * 70000 + b"z" * 70000, None)]
    assert decoder.holding == 0


# -- differential: the SDK client's own reader (httpx2's EventSource) -------------------------

_ascii = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
_line = st.one_of(
    st.tuples(st.just("data"), _ascii),
    st.tuples(st.just("event"), _ascii),
    st.tuples(st.just("id"), _ascii),
    st.tuples(st.just("retry"), st.text(alphabet="0123456789", min_size=1, max_size=6)),
    st.tuples(st.just(":"), _ascii),
    st.tuples(st.sampled_from(["data", "id", "event"]), st.just(None)),
)


@st.composite
def _sdk_streams(draw):
    """Streams whose events all end with a blank line (one end of line for the whole stream: a
    CR then an LF in the next piece would be one end of line, not a line and a blank line)."""
    out = []
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    for _ in range(draw(st.integers(0, 5))):
        for name, value in draw(st.lists(_line, max_size=5)):
            if name == ":":
                out.append(":" + value + eol)
            elif value is None:
                out.append(name + eol)
            else:
                out.append(name + ":" + draw(st.sampled_from(["", " "])) + value + eol)
        out.append(eol)
    return "".join(out).encode()


@settings(max_examples=300, deadline=None)
@given(_sdk_streams(), st.lists(st.integers(0, 400), max_size=6))
def test_the_events_are_those_the_sdk_client_reads(stream, cuts):
    """What wrap relays of an event stream is what the MCP SDK's client reads of it (httpx2's
    EventSource): the same messages (an event with data), types and ids, and the same `retry`."""
    import httpx2

    response = httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=stream,
        request=httpx2.Request("GET", "http://127.0.0.1/mcp"),
    )
    sdk = list(httpx2.EventSource(response))
    want = [(e.event, e.data, e.id) for e in sdk if e.data]
    decoder = SSEDecoder(1 << 20)
    got = []
    start = 0
    for cut in sorted(c for c in cuts if c <= len(stream)) + [len(stream)]:
        got += decoder.feed(stream[start:cut])
        start = cut
    assert [(e.type, e.data.decode(), e.id or "") for e in got if isinstance(e, Event) and e.data] == want
    retries = [e.retry for e in sdk if e.retry is not None]
    assert decoder.retry_ms == (retries[-1] if retries else None)
