"""The prefilter of the secret detector (docs/inspect.md, "Speed"): which sets of literals occur,
in either case when folded; never a false "absent", even without its engine."""

from __future__ import annotations

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
    out = [any(lit.translate(FOLD) in text.translate(FOLD) if fold else lit in text for lit in lits)
           for lits, fold in SETS]
    return out if any(out) else None


@pytest.mark.parametrize("text", [
    "", "nothing here", "a ghp_ token", "axb", "a.b", "SeCrEt", "KEY=v", "KEY=V", "x://y", "[x]", "(?i)",
    "a|b", "\\d", "9", "ab", "\ud800 secret \udfff", "\u212aey=v",  # a Kelvin sign is not an ASCII k
])
def test_which(text: str) -> None:
    assert Prefilter(SETS_RE).which(text) == expected(text)


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.lists(st.sampled_from(["ghp_", "a.b", "SECRET", "Key=V", "://", "[x]", "a|b", "\\d", "x", " ", "\ud800", "é"]))
    .map("".join),
    st.text(),
))
def test_which_is_the_plain_search(text: str) -> None:
    assert Prefilter(SETS_RE).which(text) == expected(text)


def test_without_its_engine_every_set_counts_as_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema_rs", None)  # the import fails
    assert Prefilter(SETS_RE).which("nothing here") == [True, True, True]


@pytest.mark.parametrize("groups", [None, [[0, 2], [1]], [[2], [1], [0]]])
def test_groups_change_nothing(groups: list[list[int]] | None) -> None:
    for text in ["", "ghp_", "x://SECRET", "a.b [x] key=V", "none"]:
        assert Prefilter(SETS_RE, groups).which(text) == expected(text)


def test_groups_must_hold_every_set_once() -> None:
    for groups in ([[0, 1]], [[0, 1], [1, 2]], [[0, 1, 2, 3]]):
        with pytest.raises(ValueError):
            Prefilter(SETS_RE, groups)


def test_regex_sets() -> None:
    sets = [[r"[bB]earer[ \t]{1,8}[0-9]{4}"], [literal("://")]]
    assert Prefilter(sets).which("Bearer  1234 x") == [True, False]
    assert Prefilter(sets).which("Bearer 123 https://x") == [False, True]
    assert Prefilter(sets).which("bearer 123") is None
