"""assay.jsonwrite writes exactly what json.dumps writes (docs/wrap-records.md, first section),
for every value JSON can hold: big integers, lone surrogates, U+2028/U+2029, control
characters, floats of every spelling, NaN and the infinities."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.jsonwrite import dumps, dumps_ascii, dumps_utf8, pretty

SPECIAL_TEXT = st.sampled_from(
    [
        "",
        "/",
        "</script>",
        "\u2028",
        "\u2029",
        "\x00\x1f\x7f\x85",
        "\ud83d",
        "\udcff",
        "caf\u00e9",
        "😀",
        '"\\',
        "\n\r\t\b\f",
        "\ufeff",
        "\u00cb",
    ]
)
TEXT = st.text(st.characters(blacklist_categories=()), max_size=8) | st.text(max_size=8) | SPECIAL_TEXT
FLOATS = st.floats() | st.sampled_from([1e-7, 1e-5, 1e16, 1e22, 1.5e300, 5e-324, -0.0, 0.1, 1e15, 123456789012345680.0])
INTS = (
    st.integers() | st.integers(min_value=-(2**100), max_value=2**100) | st.sampled_from([2**63, 2**64, -(2**63) - 1])
)
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
    assert (
        dumps_utf8({"a": "x/y é \u2028 😀", "n": 2**70})
        == '{"a":"x/y é \u2028 😀","n":1180591620717411303424}'.encode()
    )
    assert (
        dumps([1e-7, 1e16, 0.00001, float("nan"), float("inf"), -float("inf")])
        == "[1e-07,1e+16,1e-05,NaN,Infinity,-Infinity]"
    )
    assert dumps_ascii(["\ud83d", "é", "😀", "\x7f"]) == '["\\ud83d","\\u00e9","\\ud83d\\ude00","\\u007f"]'
    assert dumps({"k": [{}, []]}) == '{"k":[{},[]]}' and pretty({}) == "{}"


def test_what_changed_from_ujson():
    """The encoder these functions replaced (ujson) spelled a negative exponent with one digit
    and left DEL raw in an ASCII-escaped line; everything else was byte-identical (a hypothesis
    comparison of the two, run before ujson went, found no other difference)."""
    assert dumps([1e-7, 1e-5]) == "[1e-07,1e-05]"  # ujson: [1e-7,1e-5]
    assert dumps_ascii(["\ud83d\x7f"]) == '["\\ud83d\\u007f"]'  # ujson: ["\\ud83d\x7f"]
