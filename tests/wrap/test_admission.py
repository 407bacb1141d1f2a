"""Client-frame admission, sans-IO (docs/wrap.md, "Client frames")."""

from __future__ import annotations

import json
import time as _time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.session import admission as _adm
from assay.session.admission import Admitted, LineSplitter, Rejected, admit, frame_digest

# (line, expected reason) for every rejection reason, several spellings each.
BAD = [
    (b"\xff\xfe{}\n", "invalid_utf8"),
    (b'{"a":"\xc3"}\n', "invalid_utf8"),
    (b'{"jsonrpc":"2.0",\r"id":1}\n', "embedded_line_break"),
    (b'{"a":1}\r\r\n', "embedded_line_break"),
    (b"{\n", "malformed_json"),
    (b"}\n", "malformed_json"),
    (b'{"a":NaN}\n', "malformed_json"),
    (b'{"a":Infinity}\n', "malformed_json"),
    (b'{"a":-Infinity}\n', "malformed_json"),
    (b'{"a":1e400}\n', "malformed_json"),
    (b'{"a":"\x01"}\n', "malformed_json"),
    (b'{"a":"\\ud800"}\n', "malformed_json"),
    (b'{"a":"\\udc00x"}\n', "malformed_json"),
    (b"\xef\xbb\xbf{}\n", "malformed_json"),
    (b"{} {}\n", "malformed_json"),
    (b'{"a":1} x\n', "malformed_json"),
    (b"{'a':1}\n", "malformed_json"),
    (b'{"a":1,}\n', "malformed_json"),
    (b"[" * 129 + b"]" * 129 + b"\n", "malformed_json"),
    (b'{"a":' * 129 + b"1" + b"}" * 129 + b"\n", "malformed_json"),
    (b"[]\n", "batch"),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n', "batch"),
    (b'[{"a":1,"a":2}]\n', "batch"),
    (b'"x"\n', "not_an_object"),
    (b"1\n", "not_an_object"),
    (b"true\n", "not_an_object"),
    (b"null\n", "not_an_object"),
    (b'{"id":1,"id":2}\n', "duplicate_member"),
    (b'{"params":{"a":{"b":1,"b":1}}}\n', "duplicate_member"),
    (b'{"params":[{"x":1,"x":2}]}\n', "duplicate_member"),
    (b'{"method":1}\n', "non_string_method"),
    (b'{"method":null,"id":1}\n', "non_string_method"),
    (b'{"method":["tools/call"]}\n', "non_string_method"),
]


@pytest.mark.parametrize("line,reason", BAD)
def test_bad_frames_are_rejected_with_their_reason(line, reason):
    """Each fault gets its reason; with several faults, the first in the documented order."""
    verdict = admit(line)
    assert isinstance(verdict, Rejected)
    assert verdict.reason == reason


@pytest.mark.parametrize("line", [b"\n", b"\r\n", b"   \t \n", b"", b" ", b"\t\r\n"])
def test_blank_lines_are_ignored(line):
    """Blank after removing the terminator -> None (no reply, no forward)."""
    assert admit(line) is None


GOOD = [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n',
    b'  {"jsonrpc":"2.0","method":"notifications/initialized"}\t\n',
    b'{"jsonrpc":"2.0","id":2,"result":{"roots":[]}}\n',  # client response: no method
    b'{"a":"line\\nbreak\\r escaped"}\n',
    b'{"params":{"list":[1,2,[3,[4]]],"o":{"k":[{"x":1},{"x":2}]}}}\n',
    b'{"a":"\\ud83d\\ude00 \xc3\xa9"}\n',
    b'{"a":1e308,"b":-0,"c":123456789012345678901234567890}\n',
    b"[" * 0 + b'{"x":' + b"[" * 127 + b"]" * 127 + b"}\n",  # depth exactly 128
    b'{"last":"no terminator"}',
]


@pytest.mark.parametrize("line", GOOD)
def test_good_frames_are_admitted_with_their_bytes(line):
    verdict = admit(line)
    assert isinstance(verdict, Admitted)
    assert verdict.raw == line  # byte for byte, terminator included


# -- the splitter -------------------------------------------------------------------------------


def split_all(data: bytes, cap: int, chunk: int) -> list:
    sp = LineSplitter(cap)
    out = []
    for i in range(0, len(data), chunk):
        out.extend(sp.feed(data[i : i + chunk]))
    last = sp.close()
    if last is not None:
        out.append(last)
    return out


def test_splits_on_lf_only():
    """CR, NEL and U+2028 do not split."""
    data = b'{"a":"x\xe2\x80\xa8y"}\n{"b":"\xc2\x85"}\r\n'
    assert split_all(data, 100, 3) == [b'{"a":"x\xe2\x80\xa8y"}\n', b'{"b":"\xc2\x85"}\r\n']


def test_unterminated_last_line_is_a_line():
    assert split_all(b"{}\n{}", 10, 1) == [b"{}\n", b"{}"]


@pytest.mark.parametrize("chunk", [1, 2, 7, 1000])
def test_frame_cap_is_inclusive_and_counts_without_terminator(chunk):
    """A body of exactly the cap is admitted (with LF or CRLF); one more byte is rejected."""
    cap = 10
    exact = b"x" * cap
    over = b"y" * (cap + 1)
    data = exact + b"\n" + exact + b"\r\n" + over + b"\n" + over + b"\r\n" + b"ok\n"
    out = split_all(data, cap, chunk)
    assert out[0] == exact + b"\n" and out[1] == exact + b"\r\n"
    assert isinstance(out[2], Rejected) and out[2].reason == "frame_too_large"
    assert isinstance(out[3], Rejected) and out[3].reason == "frame_too_large"
    assert out[2].frame_digest == frame_digest(over + b"\n")
    assert out[3].frame_digest == frame_digest(over + b"\r\n")
    assert out[4] == b"ok\n"


def test_huge_line_is_never_buffered_whole():
    """The relay does not buffer beyond the cap; it discards up to the next newline."""
    sp = LineSplitter(1024)
    for _ in range(1000):
        assert sp.feed(b"z" * 4096) == []
        assert len(sp._buf) <= 1025
    out = sp.feed(b"zz\nnext\n")
    assert isinstance(out[0], Rejected) and out[0].reason == "frame_too_large"
    assert out[1] == b"next\n"


def test_huge_unterminated_line_at_eof():
    sp = LineSplitter(4)
    assert sp.feed(b"abcdefgh") == []
    last = sp.close()
    assert isinstance(last, Rejected) and last.reason == "frame_too_large"


# -- properties ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6), st.sampled_from([b"\n", b"\r\n", b""]))
def test_any_json_object_is_admitted_byte_for_byte(obj, terminator):
    obj.pop("method", None)
    line = json.dumps(obj, ensure_ascii=False).encode() + terminator
    verdict = admit(line)
    assert isinstance(verdict, Admitted)
    assert verdict.raw == line
    assert verdict.frame == json.loads(line)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_raise(data):
    line = data.replace(b"\n", b"") + b"\n"
    verdict = admit(line)
    assert verdict is None or isinstance(verdict, (Admitted, Rejected))
    if isinstance(verdict, Admitted):
        assert isinstance(verdict.frame, dict)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=30), max_size=10), st.integers(1, 20), st.integers(1, 50))
def test_splitter_matches_reference_split(parts, chunk, cap):
    """Chunking never changes the result: lines equal a reference split on LF."""
    data = b"\n".join(parts)
    out = split_all(data, cap, chunk)
    expected = []
    pieces = data.split(b"\n")
    for i, piece in enumerate(pieces):
        terminated = i < len(pieces) - 1
        line = piece + (b"\n" if terminated else b"")
        if not line:
            continue
        body = len(piece) - (1 if terminated and piece.endswith(b"\r") else 0)
        expected.append(("big", frame_digest(line)) if body > cap else line)
    got = [("big", x.frame_digest) if isinstance(x, Rejected) else x for x in out]
    assert got == expected


# -- nesting depth is decided in linear time (docs/wrap.md, "Admission") -----------------------


def _reference_depth(content: bytes) -> int:
    import re as _re

    stripped = _re.sub(rb'"(?:[^"\\]|\\.)*"', b"", content)
    depth = peak = 0
    for b in stripped:
        if b in b"[{":
            depth += 1
            peak = max(peak, depth)
        elif b in b"]}":
            depth -= 1
    return peak


def test_a_64_mib_line_of_brackets_is_refused_quickly():
    line = b"[" * (64 << 20) + b"\n"
    started = _time.process_time()
    assert admit(line).reason == "malformed_json"
    assert _time.process_time() - started < 5  # CPU time: was 9-11 s; well under a second now


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b",", b"\\", b"a", b"[]"]), max_size=600),
    st.integers(min_value=1, max_value=64),
)
def test_depth_check_matches_a_plain_walk(parts, block):
    content = b"".join(parts)
    content += b"]" * max(0, content.count(b"[") + content.count(b"{") - content.count(b"]") - content.count(b"}"))
    old = _adm._DEPTH_BLOCK
    _adm._DEPTH_BLOCK = block  # many blocks: the depth carried across them must stay exact
    try:
        doc = b"[" * (_adm.MAX_DEPTH - 3) + content  # near the limit, so both answers occur
        assert _adm.too_deep(doc + b"]" * (_adm.MAX_DEPTH - 3)) == (_reference_depth(doc) > _adm.MAX_DEPTH)
    finally:
        _adm._DEPTH_BLOCK = old


def test_a_line_refused_unread_is_told_to_the_on_unread_hook_with_its_reason() -> None:
    """``SessionOptions.on_unread`` hears every line the guard answers with a null id (serve's
    link answers its request with it: docs/serve.md, "Upstreams and the agent session of a
    user"), and nothing else."""
    from assay.policy import load_policy
    from assay.session.session import SessionOptions

    from tests.wrap._harness import Harness

    told: list[tuple[bytes, str]] = []
    h = Harness(
        load_policy(b'version: "2.0"\ntools:\n  allow: ["a"]\n'),
        SessionOptions(on_unread=lambda line, reason: told.append((line, reason))),
    )
    h.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a", "arguments": {}}})
    denied = h.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "b", "arguments": {}}})
    assert denied.disposition == "blocked" and b'"id":2' in (denied.reply or b"")  # read: answered with its id
    assert told == []
    deep = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":' + b"[" * 200 + b"]" * 200 + b"}"
    out = h.handle(deep)
    assert out.disposition == "rejected" and b'"id":null' in (out.reply or b"")
    assert told == [(deep + b"\n", "malformed_json")]
    h.handle({"jsonrpc": "2.0", "id": 4, "method": 7})
    assert told[-1] == (b'{"jsonrpc": "2.0", "id": 4, "method": 7}\n', "non_string_method")
