"""The one set of strict JSON pieces (assay/strictjson.py) and the readers that use them:
assay.canonical.loads_strict and wrap's admission (docs/wrap.md, "Client frames")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay import canonical, strictjson
from assay.strictjson import (
    ConstantError,
    DuplicateFlag,
    DuplicateMemberError,
    StrictJSONError,
    bounded_int,
    finite_float,
    refuse_constant,
    unique_pairs,
)
from assay.session import admission


def test_unique_pairs_names_the_first_repeat():
    assert unique_pairs([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}
    with pytest.raises(DuplicateMemberError) as info:
        unique_pairs([("a", 1), ("b", 2), ("b", 3), ("a", 4)])
    assert info.value.name == "b" and info.value.reason == "duplicate_member"
    assert isinstance(info.value, ValueError)


def test_duplicate_flag_keeps_going_and_the_last_value_wins():
    flag = DuplicateFlag()
    assert flag([("a", 1)]) == {"a": 1} and not flag.duplicate
    assert flag([("a", 1), ("a", 2)]) == {"a": 2} and flag.duplicate


@pytest.mark.parametrize("name", ["NaN", "Infinity", "-Infinity"])
def test_constants_are_refused(name):
    with pytest.raises(ConstantError) as info:
        refuse_constant(name)
    assert info.value.name == name and str(info.value) == f"{name} is not valid JSON"


def test_numbers_that_overflow_a_double_are_refused():
    assert finite_float("1.5e3") == 1500.0
    with pytest.raises(StrictJSONError, match="number out of range"):
        finite_float("1e400")
    assert bounded_int("12") == 12
    with pytest.raises(StrictJSONError, match="number out of range"):
        bounded_int("9" * 400)
    assert bounded_int("1" * 301) == int("1" * 301)


def test_every_reader_uses_the_same_hooks():
    for decoder in (canonical._DECODER, admission._DECODER):
        assert decoder.object_pairs_hook is unique_pairs
        assert decoder.parse_constant is refuse_constant and decoder.parse_float is finite_float
    careful = admission._DECODER_CAREFUL
    assert isinstance(careful.object_pairs_hook, DuplicateFlag)
    assert careful.parse_int is bounded_int and careful.parse_float is finite_float
    assert canonical.StrictJSONError is strictjson.StrictJSONError
    assert canonical.DuplicateMemberError is strictjson.DuplicateMemberError


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_loads_strict_reads_what_json_writes(value):
    assert canonical.loads_strict(json.dumps(value)) == value


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"a":1,"a":2}', "duplicate_member"),
        ('{"x":[{"b":1,"b":1}]}', "duplicate_member"),
        ("[NaN]", "malformed_json"),
        ("1e999", "malformed_json"),
        ('{"a":-Infinity}', "malformed_json"),
    ],
)
def test_canonical_and_admission_refuse_alike(text, reason):
    with pytest.raises(StrictJSONError) as info:
        canonical.loads_strict(text)
    assert info.value.reason == reason
    verdict = admission.admit(b'{"jsonrpc":"2.0","id":1,"params":' + text.encode() + b"}\n")
    assert isinstance(verdict, admission.Rejected)
    assert verdict.reason == (admission.DUPLICATE_MEMBER if reason == "duplicate_member" else admission.MALFORMED_JSON)
