"""Tool-name patterns (docs/policy.md, "Tool-name patterns"), against a reference predicate."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policy import NameMatcher, pattern_matches


def reference(name: str, pattern: str) -> bool:
    """P1-P5 written independently: split the pattern into leading stars, core, trailing stars;
    the exact-name form first (a leading ``=``: the rest, literally)."""
    if pattern[:1] == "=":
        return name == pattern[1:]
    m = re.fullmatch(r"(\**)(.*?)(\**)", pattern, re.S)
    assert m is not None
    lead, core, trail = m.group(1), m.group(2), m.group(3)
    if not lead and not trail:
        return name == pattern
    if lead and trail:
        return core in name
    if trail:
        return name[: len(core)] == core
    return len(name) >= len(core) and name[len(name) - len(core) :] == core


@pytest.mark.parametrize(
    "pattern, name, expected",
    [
        ("read_*", "read_file", True),
        ("read_*", "my_read_file", False),
        ("*_file", "_file_reader", False),
        ("*search*", "web_search_api", True),
        ("exec", "exec_shell", False),
        ("*", "", True),
        ("**", "anything", True),
        ("***", "", True),
        ("read_*_file", "read_config_file", False),
        ("read_*_file", "read_*_file", True),
        ("*a*b*", "xa*by", True),
        ("*a*b*", "xaby", False),
        ("", "", True),
        ("", "x", False),
        ("Read_*", "read_file", False),
        ("a.*", "a.b.c", True),
        ("*__x", "srv__x", True),
        ("=*", "*", True),
        ("=*", "anything", False),
        ("=x*", "xy", False),
        ("=*x", "ax", False),
        ("==x", "=x", True),
        ("==x", "x", False),
        ("=", "", True),
        ("=", "=", False),
        ("*=*", "a=b", True),
        ("x=*", "x=y", True),
    ],
)
def test_P1_P5_table(pattern, name, expected):
    assert pattern_matches(name, pattern) is expected
    assert NameMatcher([pattern])(name) is expected
    assert reference(name, pattern) is expected


_alpha = st.text(alphabet="ab*_.=", max_size=8)


@settings(max_examples=2000, deadline=None)
@given(_alpha, _alpha)
def test_single_pattern_matches_reference(name, pattern):
    assert pattern_matches(name, pattern) == reference(name, pattern)


@settings(max_examples=1000, deadline=None)
@given(_alpha, st.lists(_alpha, max_size=6))
def test_compiled_list_equals_any_of_reference(name, patterns):
    assert NameMatcher(patterns)(name) == any(reference(name, p) for p in patterns)
