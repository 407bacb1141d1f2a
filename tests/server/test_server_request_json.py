"""The strict reader of request lines (docs/server.md, "Protocol"): the faster duplicate-member
check refuses exactly what a member-by-member check refuses, naming the same member."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.canonical import DuplicateMemberError, StrictJSONError, loads_strict


def _reference_pairs(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateMemberError(key)
        obj[key] = value
    return obj


def reference(text: str):
    """What a member-by-member duplicate check gives: ("ok", value) or ("dup", name)."""
    try:
        return "ok", json.JSONDecoder(object_pairs_hook=_reference_pairs).decode(text)
    except DuplicateMemberError as exc:
        return "dup", exc.name


keys = st.sampled_from(["a", "b", "c", "é", ""])
scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=3)


@st.composite
def objects_text(draw, depth=0):
    """A JSON object text whose members may repeat names, nested a few levels."""
    members = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(keys)
        if depth < 2 and draw(st.booleans()):
            value = draw(objects_text(depth + 1))
        else:
            value = json.dumps(draw(scalars))
        members.append(json.dumps(key) + ":" + value)
    return "{" + ",".join(members) + "}"


@settings(max_examples=400, deadline=None)
@given(text=objects_text())
def test_duplicate_members_are_refused_as_before(text):
    kind, expected = reference(text)
    if kind == "ok":
        assert loads_strict(text) == expected
    else:
        with pytest.raises(DuplicateMemberError) as info:
            loads_strict(text)
        assert info.value.name == expected
        assert info.value.reason == "duplicate_member"


def test_first_repeated_name_is_named():
    with pytest.raises(DuplicateMemberError) as info:
        loads_strict('{"x":1,"y":2,"y":3,"x":4}')
    assert info.value.name == "y"
    with pytest.raises(StrictJSONError):
        loads_strict('{"a":{"b":1,"b":1}}')


def _outcome(text):
    try:
        return "ok", loads_strict(text)
    except StrictJSONError as exc:
        return exc.reason, str(exc)
    except TypeError as exc:
        return "type", str(exc)


def _slow(text):
    """The same text through decode() alone (the reader without its whole-text shortcut)."""
    from assay import canonical

    def refuse(_text, _idx):
        raise StopIteration(0)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(canonical, "_SCAN", refuse)
        return _outcome(text)


request_texts = st.one_of(
    objects_text(),
    st.builds(
        lambda a, t, b: a + t + b,
        st.sampled_from(["", " ", "\n", "\t "]),
        objects_text(),
        st.sampled_from(["", " ", "x", "}", " 1"]),
    ),
    st.sampled_from(
        [
            "NaN",
            "[Infinity]",
            "-Infinity",
            "1e400",
            "[1e999]",
            "[" * 5000 + "]" * 5000,
            "",
            " ",
            "{",
            '"\\ud800"',
            "1" * 5000,
        ]
    ),
    st.text(alphabet='{}[]":,0123456789.eE+-tfnrul \\ab', max_size=30),
)


@settings(max_examples=400, deadline=None)
@given(text=request_texts)
def test_whole_text_shortcut_accepts_and_refuses_alike(text):
    """With and without the shortcut: the same value, or the same refusal and message."""
    assert _outcome(text) == _slow(text)
