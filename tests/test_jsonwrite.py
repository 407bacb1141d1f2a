"""assay.jsonwrite writes exactly what json.dumps writes (docs/wrap-records.md, first section),
for every value JSON can hold: big integers, lone surrogates, U+2028/U+2029, control
characters, floats of every spelling, NaN and the infinities."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.jsonwrite import dumps, dumps_ascii, dumps_utf8, pretty

SPECIAL_TEXT = st.sampled_from(["", "/", "</script>", "\u2028", "\u2029", "\x00\x1f\x7f\x85", "\ud83d", "\udcff",
                                "caf\u00e9", "😀", '"\\', "\n\r\t\b\f", "\ufeff", "\u00cb"])
TEXT = st.text(st.characters(blacklist_categories=()), max_size=8) | st.text(max_size=8) | SPECIAL_TEXT
FLOATS = st.floats() | st.sampled_from([1e-7, 1e-5, 1e16, 1e22, 1.5e300, 5e-324, -0.0, 0.1, 1e15, 123456789012345680.0])
INTS = st.integers() | st.integers(min_value=-(2**100), max_value=2**100) | st.sampled_from([2**63, 2**64, -(2**63) - 1])
LEAF = st.none() | st.booleans() | INTS | FLOATS | TEXT
JSON = st.recursive(LEAF, lambda c: st.lists(c, max_size=4) | st.dictionaries(TEXT, c, max_size=4), max_leaves=20)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_the_standard_librarys_text(value):
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert dumps(value) == expected
    assert pretty(value) == json.dumps(value, indent=2, ensure_ascii=False)
    assert dumps_ascii(value) == json.dumps(value, separators=(",", ":"))
    if _has_lone_surrogate(expected):
        with pytest.raises(UnicodeEncodeError):
            dumps_utf8(value)
    else:
        assert dumps_utf8(value) == expected.encode("utf-8")


def test_spellings_pinned():
    assert dumps_utf8({"a": "x/y é \u2028 😀", "n": 2**70}) == '{"a":"x/y é \u2028 😀","n":1180591620717411303424}'.encode()
    assert dumps([1e-7, 1e16, 0.00001, float("nan"), float("inf"), -float("inf")]) == "[1e-07,1e+16,1e-05,NaN,Infinity,-Infinity]"
    assert dumps_ascii(["\ud83d", "é", "😀", "\x7f"]) == '["\\ud83d","\\u00e9","\\ud83d\\ude00","\\u007f"]'
    assert dumps({"k": [{}, []]}) == '{"k":[{},[]]}' and pretty({}) == "{}"


# --- against ujson, the encoder these functions replaced -----------------------------------------


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_against_ujson(value):
    ujson = pytest.importorskip("ujson")
    try:
        old = ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False)
    except OverflowError:
        return
    new = dumps(value)
    if "e-" in old:  # ujson writes a negative exponent with one digit where json pads it to two
        assert _same(json.loads(old), json.loads(new))
    else:
        assert new == old
    # ujson's ASCII form left DEL (U+007F) raw; json escapes it like every other non-printable
    old_ascii = ujson.dumps(value, ensure_ascii=True, escape_forward_slashes=False).replace("\x7f", "\\u007f")
    if "e-" in old_ascii:
        assert _same(json.loads(old_ascii), json.loads(dumps_ascii(value)))
    else:
        assert dumps_ascii(value) == old_ascii
