"""The prefilter of the detectors (docs/inspect.md, "Speed"): which sets of regexes match, in one
pass of google-re2's set; the same answer as searching each regex with Python's ``re``; never a
false "absent", even without its engine or on a text made to blow up its automaton."""

from __future__ import annotations

import re
import string
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect.prefilter import Prefilter, literal

SETS = [(("ghp_", "a.b"), False), (("secret", "key=v"), True), (("://", "[x]", "(?i)", "a|b", "\\d"), False)]


SETS_RE = [[literal(lit, fold) for lit in lits] for lits, fold in SETS]
FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # ASCII letters only


def expected(text: str) -> list[bool] | None:
    out = [
        any(lit.translate(FOLD) in text.translate(FOLD) if fold else lit in text for lit in lits) for lits, fold in SETS
    ]
    return out if any(out) else None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nothing here",
        "a ghp_ token",
        "axb",
        "a.b",
        "SeCrEt",
        "KEY=v",
        "KEY=V",
        "x://y",
        "[x]",
        "(?i)",
        "a|b",
        "\\d",
        "9",
        "ab",
        "\ud800 secret \udfff",
        "\u212aey=v",  # a Kelvin sign is not an ASCII k
    ],
)
def test_which(text: str) -> None:
    assert Prefilter(SETS_RE).which(text) == expected(text)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.lists(
            st.sampled_from(["ghp_", "a.b", "SECRET", "Key=V", "://", "[x]", "a|b", "\\d", "x", " ", "\ud800", "é"])
        ).map("".join),
        st.text(),
    )
)
def test_which_is_the_plain_search(text: str) -> None:
    assert Prefilter(SETS_RE).which(text) == expected(text)
    if "\ud800" not in text:  # UTF-8 bytes, as a server's line comes: the same answer
        assert Prefilter(SETS_RE).which(text.encode()) == expected(text)


def test_without_its_engine_every_set_counts_as_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # the import fails
    assert Prefilter(SETS_RE, shared=False).which("nothing here") == [True, True, True]


def test_a_regex_the_engine_refuses_makes_its_set_present() -> None:
    assert Prefilter([["(?<=x)y"], ["z"]]).which("nothing") == [True, False]  # RE2 has no look-behind
    assert Prefilter([["a{2000}"], ["z"]]).which("nothing z") == [True, True]  # nor repeats over 1000
    assert Prefilter([["x"], ["z"]]).which("nothing") is None  # the others are not touched


def test_the_detectors_share_one_pass_per_text() -> None:
    from assay.inspect import prefilter

    first = Prefilter([["alpha"]])
    second = Prefilter([["beta"]])
    text = "alpha and gamma " * 1000
    calls = []
    engine = prefilter._SHARED
    first.which("warm")
    second.which("warm")  # both registered: the set is compiled

    def counting(data: bytes) -> object:
        calls.append(len(data))
        assert engine._match is not None
        return original_match(data)

    original_match = engine._match
    engine._match = counting
    try:
        assert first.which(text) == [True]
        assert second.which(text) is None
        assert calls == [len(text)]  # one pass for both
        assert second.which(text[:-1] + " ") is None and len(calls) == 2  # another object: asked again
    finally:
        engine._match = original_match


def test_regex_sets() -> None:
    sets = [[r"[bB]earer[ \t]{1,8}[0-9]{4}"], [literal("://")]]
    assert Prefilter(sets).which("Bearer  1234 x") == [True, False]
    assert Prefilter(sets).which("Bearer 123 https://x") == [False, True]
    assert Prefilter(sets).which("bearer 123") is None


def test_a_class_takes_one_character_whatever_its_bytes() -> None:
    """RE2 reads UTF-8 as code points: ``[^ ]{3}`` takes three characters of any length."""
    sets = [[r"<[^ >]{3}>"]]
    for text in ("<abc>", "<é\u200b\U0001f600>", "<日本語>"):
        assert Prefilter(sets).which(text) == [True]
        assert Prefilter(sets).which(text.encode()) == [True]
    assert Prefilter(sets).which("<éé>") is None


# what blows up a DFA: counted repetitions after a common prefix, alternatives that share
# characters, a long text that visits many states; the set must still answer as re does
_HEAVY = [
    r"://[^ \t/#@:]*:[^ \t/#]+@",
    r"[bB][eE][aA][rR][eE][rR][ \t]+[A-Za-z0-9\-._~+/]{16}",
    r"a[ab]{0,40}b",
    r"(?i)(?:pass[_.\-]?(?:word|phrase)|passwd|pwd|secret|token|api[_.\-]?key)[\"']?[ \t]*[:=]",
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff]",
    r"x[^y]{0,300}z",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "a",
                    "b",
                    "ab",
                    "://",
                    ":",
                    "@",
                    "x",
                    "y",
                    "z",
                    " ",
                    "bearer ",
                    "Token",
                    "=",
                    "\u200b",
                    "é",
                    "0123456789abcdef",
                ]
            ),
            st.text(max_size=4),
        ),
        max_size=400,
    ).map("".join)
)
def test_a_heavy_set_answers_as_re_does(text: str) -> None:
    sets = [[p] for p in _HEAVY]
    want = [re.search(p, text) is not None for p in _HEAVY]
    assert Prefilter(sets).which(text) == (want if any(want) else None)


def test_a_long_text_that_visits_many_states_is_answered_whole() -> None:
    sets = [[p] for p in _HEAVY]
    body = "".join(chr(97 + (i * 7919) % 3) for i in range(2_000_000))  # a, b, c in no order
    for text in (body + "x" + "q" * 299 + "z", body + "://u" + ":p" * 10_000 + "@"):
        want = [re.search(p, text) is not None for p in _HEAVY]
        assert Prefilter(sets).which(text) == want


def test_the_detectors_prefilters_compile() -> None:
    """A regex RE2 refuses would make a prefilter let everything through, silently: slow, not
    wrong. The detectors' own must all compile."""
    from assay.inspect.injection import GATE
    from assay.inspect.secret_rules import PREFILTER

    for prefilter in (PREFILTER, GATE):
        prefilter.which("x")
        assert not any(prefilter._open)
        for alternative in prefilter.alternatives:
            alone = Prefilter([[alternative]], shared=False)
            alone.which("x")
            assert alone._open == [False], alternative
