"""wrap reads every server line with msgspec first and the lenient readers after it
(assay/session/serverlines.py): the values are those the reader before it (ujson, then the same
fallbacks) read; the looser number spellings ujson read are kept."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.session.serverlines import NOT_JSON, TOO_HARD, RawNumber, read_line

TEXT = st.text(st.characters(blacklist_categories=()), max_size=6) | st.sampled_from(
    ["", "\u2028", "\x00", "\x1f", "\ud83d", "😀", "é", '"', "\\"]
)
FLOATS = st.floats() | st.sampled_from([1e-7, 1e16, 1e22, 5e-324, -0.0, 0.1])
INTS = st.integers() | st.integers(min_value=-(2**100), max_value=2**100)
LEAF = st.none() | st.booleans() | INTS | FLOATS | TEXT
JSON = st.recursive(LEAF, lambda c: st.lists(c, max_size=4) | st.dictionaries(TEXT, c, max_size=4), max_leaves=12)
NUMBERISH = st.text(alphabet="-+.eE0123456789", min_size=1, max_size=6)
INSERTS = st.sampled_from(
    [
        "-",
        ".",
        "0",
        "00",
        "e",
        "E+",
        ",",
        "]",
        "}",
        "[",
        "{",
        " ",
        "\t",
        "\x00",
        "\x01",
        "\\",
        '"',
        "NaN",
        "-Infinity",
        "\\ud83d",
        "01",
        "1.",
        "-.5",
        "\r",
        "\x0b",
        ":",
        "tru",
    ]
)
RAW_INSERTS = st.sampled_from([b"\xff", b"\xed\xa0\xbd", b"\xc3", b"\xe2\x80\xa8", b"\xef\xbb\xbf"])


@st.composite
def lines(draw) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:  # number soup: ujson's looser grammar against the strict one
        tokens = draw(st.lists(NUMBERISH, min_size=1, max_size=4))
        return ("[" + ",".join(tokens) + "]" if draw(st.booleans()) else tokens[0]).encode()
    value = draw(JSON)
    text = json.dumps(
        value, ensure_ascii=draw(st.booleans()), separators=draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    )
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate as UTF-8 bytes too
    for _ in range(draw(st.integers(0, 3) if kind == 2 else st.just(0))):
        at = draw(st.integers(0, len(data)))
        piece = draw(RAW_INSERTS) if draw(st.integers(0, 4)) == 0 else draw(INSERTS).encode("utf-8", "surrogatepass")
        cut = draw(st.integers(0, 2))
        data = data[:at] + piece + data[at + cut :]
    if kind == 3:
        data = data.replace(b"1", b"01", 1).replace(b".0", b".", 1)
    return data


def same(a, b) -> bool:
    """Equal with the same types all the way down, key order and NaN included."""
    if a.__class__ is not b.__class__:
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a is b if a in (NOT_JSON, TOO_HARD) else a == b


@settings(max_examples=1000, deadline=None)
@given(lines())
def test_strict_lines_read_as_the_standard_library_reads_them(line):
    """Every line msgspec or the standard library reads strictly (the other lines are pinned
    below, against what the reader before msgspec, ujson's, read: a hypothesis comparison of
    the two readers over these lines found no difference)."""
    try:
        expected = json.loads(line.decode("utf-8"), strict=False)
    except (ValueError, RecursionError):
        return
    assert same(read_line(line), expected), line


def nest(levels: int, inner: str) -> bytes:
    return ("[" * levels + inner + "]" * levels).encode()


# (line, what it reads): what the reader before msgspec (ujson, then the same fallbacks) read
EDGES = [
    (b"01", 1),
    (b"-01", -1),
    (b"00", 0),
    (b"1.", 1.0),
    (b"1.e3", 1000.0),
    (b"-", 0),
    (b"[-]", [0]),
    (b"-.5", -0.5),
    (b"00.5", 0.5),
    (b"-0.", -0.0),
    (b'{"a":01}', {"a": 1}),
    (b"-.", NOT_JSON),
    (b".5", NOT_JSON),
    (b"-e1", NOT_JSON),
    (b"1e", NOT_JSON),
    (b"+1", NOT_JSON),
    (b"-NaN", NOT_JSON),
    (b"[01,NaN,-Infinity]", [1, math.nan, -math.inf]),
    (b'[01,"\\ud83d"]', [1, "\ud83d"]),
    (b'[01,"a\x01b"]', [1, "a\x01b"]),
    (b'[01,"a\x00b"]', NOT_JSON),  # a NUL byte: the looser reading never saw the line
    (b'[01,"\xff"]', NOT_JSON),
    (b'[01,"\xed\xa0\xbd"]', NOT_JSON),  # invalid UTF-8: neither
    (b'["\xff"]', ["\ufffd"]),
    (b'["\xed\xa0\xbd"]', ["\ufffd\ufffd\ufffd"]),
    (b'"\\ud83d"', "\ud83d"),
    (b"0" * 4400 + b"1", 1),
    (b"0" * 4290 + b"1" * 20, 11111111111111111111),
    (b"-" + b"0" * 4290 + b"9" * 19, NOT_JSON),
    (b"[01," + b"1" * 4301 + b"]", NOT_JSON),
    (b"1" + b"0" * 5000, RawNumber("1" + "0" * 5000)),
    (b"1e400", math.inf),
    (nest(1024, "01"), ("nested", 1024, 1)),
    (nest(1025, "01"), NOT_JSON),
    (nest(1500, "1"), ("nested", 1500, 1)),
    (b'{"a":1,"a":2}', {"a": 2}),
    (b"\xef\xbb\xbf1", NOT_JSON),
    (b"[1,]", NOT_JSON),
]


@pytest.mark.parametrize(("line", "expected"), EDGES, ids=range(len(EDGES)))
def test_edges(line, expected):
    for got in (read_line(line),):
        if isinstance(expected, tuple):  # deeper than a recursive comparison goes
            _, levels, inner = expected
            for _ in range(levels):
                assert got.__class__ is list and len(got) == 1
                got = got[0]
            assert same(got, inner)
        else:
            assert same(got, expected)
