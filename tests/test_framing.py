"""The one bounded LF framer (assay/framing.py) and its two users: wrap's client side
(docs/wrap.md, "Client frames") and the server's stdin (docs/server.md, "Protocol")."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from assay.framing import BoundedLineSplitter
from assay.server.framing import LineFramer, Oversize
from assay.session.admission import FRAME_TOO_LARGE, LineSplitter, Rejected


def _long(n: int, digest: str | None) -> tuple[str, int, str | None]:
    return ("long", n, digest)


def model(stream: bytes, cap: int, *, digest: bool, cr_terminates: bool = False) -> list[object]:
    """The lines of a whole stream, read at once: what any cutting into reads must give."""
    out: list[object] = []
    *whole, last = stream.split(b"\n")
    for piece in whole:
        line = piece + b"\n"
        body = piece[:-1] if piece.endswith(b"\r") else piece
        out.append(_long(len(body), hashlib.sha256(body).hexdigest() if digest else None) if len(body) > cap else line)
    if last:
        body = last[:-1] if cr_terminates and last.endswith(b"\r") and len(last) <= cap + 1 else last
        out.append(_long(len(body), hashlib.sha256(body).hexdigest() if digest else None) if len(body) > cap else body)
    return out


def run(stream: bytes, cuts: list[int], cap: int, *, digest: bool, cr_terminates: bool = False) -> list[object]:
    sp = BoundedLineSplitter(cap, _long, digest=digest)
    out: list[object] = []
    start = 0
    for cut in sorted(set(c % (len(stream) + 1) for c in cuts)) + [len(stream)]:
        out += sp.feed(stream[start:cut])
        assert sp.buffered <= cap + 1  # memory stays bounded by the cap
        start = cut
    last = sp.close(cr_terminates=cr_terminates)
    assert not sp.holding
    return out if last is None else [*out, last]


streams = st.lists(st.sampled_from([b"a", b"b", b"\r", b"\n", b"\r\n", b"xyz", b"{}"]), max_size=60).map(b"".join)


@given(streams, st.lists(st.integers(min_value=0, max_value=200), max_size=12), st.integers(0, 8), st.booleans())
def test_any_cutting_into_reads_gives_the_lines_of_the_whole_stream(stream, cuts, cap, digest):
    assert run(stream, cuts, cap, digest=digest) == model(stream, cap, digest=digest)


@given(streams, st.lists(st.integers(min_value=0, max_value=200), max_size=12), st.integers(0, 8))
def test_the_server_reading_of_a_final_cr(stream, cuts, cap):
    """The server drops a CR ending the unterminated last line (while it is still held)."""
    assert run(stream, cuts, cap, digest=False, cr_terminates=True) == model(
        stream, cap, digest=False, cr_terminates=True
    )


def test_caps_count_the_body_without_its_terminator():
    sp = BoundedLineSplitter(3, _long)
    assert sp.feed(b"abc\nabc\r\nabcd\nabcd\r\n") == [b"abc\n", b"abc\r\n", ("long", 4, None), ("long", 4, None)]
    assert sp.feed(b"abc\r") == [] and sp.feed(b"\n") == [b"abc\r\n"]


def test_an_over_long_line_is_discarded_as_it_arrives_and_reported_once():
    sp = BoundedLineSplitter(4, _long, digest=True)
    body = b"x" * 10_000 + b"\r"
    for i in range(0, len(body), 7):
        assert sp.feed(body[i : i + 7]) == []
        assert sp.buffered <= 5 and sp.holding
    assert sp.feed(b"\nok\n") == [("long", 10_000, hashlib.sha256(b"x" * 10_000).hexdigest()), b"ok\n"]


def test_partial_last_line():
    sp = BoundedLineSplitter(4, _long)
    assert sp.feed(b"one\ntw") == [b"one\n"] and sp.holding
    assert sp.close() == b"tw" and sp.close() is None
    sp = BoundedLineSplitter(4, _long)
    sp.feed(b"abcd\r")
    assert sp.close() == ("long", 5, None)  # at the end of the stream, a CR is body
    sp = BoundedLineSplitter(4, _long)
    sp.feed(b"abcd\r")
    assert sp.close(cr_terminates=True) == b"abcd"
    sp = BoundedLineSplitter(2, _long)
    sp.feed(b"abcdef\r")
    assert sp.close(cr_terminates=True) == ("long", 7, None)  # discarded: every byte counted


def test_wrap_splitter_reports_rejections_with_the_digest_of_the_line():
    sp = LineSplitter(3)
    out = sp.feed(b"abcd\r\nok\n")
    assert out[1] == b"ok\n" and isinstance(out[0], Rejected)
    assert (out[0].reason, out[0].raw, out[0].digest) == (FRAME_TOO_LARGE, b"", hashlib.sha256(b"abcd").hexdigest())
    sp.feed(b"tail\r")
    last = sp.close()
    assert isinstance(last, Rejected) and last.digest == hashlib.sha256(b"tail\r").hexdigest()


def test_server_framer_drops_terminators_and_counts_oversize():
    f = LineFramer(3)
    assert f.feed(b"abc\r\nabcd\nx") == [b"abc", Oversize(4)]
    assert f.eof() == [b"x"] and f.eof() == []
    f = LineFramer(3)
    f.feed(b"abc\r")
    assert f.eof() == [b"abc"]
