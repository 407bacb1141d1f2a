"""`policy suggest` writes only what was observed (docs/log.md, "assay mcp policy suggest"),
whatever the names: the suggested file loads through the one policy loader and allows exactly
the observed tools, and what assay's YAML reader reads from it is what libyaml reads."""

from __future__ import annotations

import json
import os
import re
import tempfile
import unicodedata

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.logs.entries import Entry, parse_line
from assay.logs.suggest import Observed, suggest
from assay.policy import load_policy, load_policy_file, pattern_matches
from assay.policy.explain import explain
from assay.policy.pipeline import Call, Pipeline
from assay.policy.yamlio import parse_yaml

T = "2026-08-22T10:15:02.123456+00:00"
LIBYAML = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PRINTABLE = re.compile(r"[\x20-\x7e\n]*")


def printable(text: str) -> bool:
    return PRINTABLE.fullmatch(text) is not None


def names_allowed(policy, called) -> list[str]:
    """The called name each tools.allow entry matches; an entry that matches none or several
    (a wildcard) fails."""
    out = []
    for p in policy.tools.allow or ():
        [hit] = [n for n in called if pattern_matches(n, p)]
        out.append(hit)
    return out


SPECIAL = [
    "*",
    "**",
    "x*",
    "*x",
    "*x*",
    "read_*_file",
    "?",
    "x?",
    "[",
    "]",
    "[a-z]",
    "'",
    '"',
    "''",
    "#",
    "# x",
    "a #b",
    "\u2028",
    "\u2029",
    "\u0085",
    "\ufeff",
    "a\u2028b",
    "=",
    "==",
    "=x",
    "=*",
    "-",
    "- '*' #",
    "",
    " ",
    "\t",
    "\\",
    "&a",
    "*a",
    "!tag",
    "%YAML",
    "@",
    "`",
    "|",
    ">",
    "{",
    "}",
    ",",
    ":",
    ": ",
    "x: y",
    "\r",
    "\n",
    "\x00",
    "\x7f",
    "\u200b",
    "\U0001f600",
    "\U0010ffff",
    "\ue000",
    "\x1b[2K",
    "...",
    "---",
    "null",
    "~",
    "yes",
    "0x1",
    "audit_helper\u2028    - '*' #",
    "audit_helper\u0085  - '*'",
    "x\u2029deny: []",
]
_chars = st.characters(exclude_categories=["Cs"])  # every code point but surrogates (no UTF-8 form)
names = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(_chars, max_size=12),
    st.text(st.sampled_from("*?[]#'\"=\u2028\u2029\u0085\ufeff\n ab-:"), max_size=8),
    st.text(_chars, min_size=300, max_size=2000),  # very long names
)


def entry(tool: str, outcome: str = "allow", server: str = "fs") -> Entry:
    data = {
        "tool": tool,
        "decision": "deny" if outcome == "deny" else "allow",
        "server": server,
        "session": None,
        "reason_code": "P_TOOL_DENIED" if outcome == "deny" else "P_POLICY_ALLOW",
    }
    e = parse_line(json.dumps({"specversion": "1.0", "type": "assay.tool.decision", "time": T, "data": data}).encode())
    assert isinstance(e, Entry)
    return e


def suggested(called, denied=(), listed=(), servers=("fs",)):
    calls = [entry(n, server=servers[i % len(servers)]) for i, n in enumerate(called)]
    calls += [entry(n, "deny") for n in denied]
    observed = Observed()
    for c in calls:
        observed.call(c)
    for n in listed:
        observed.listing({"tool": n, "annotations": {"destructiveHint": True}})
    return suggest(observed, lambda: iter(calls), home="/home/ann", header=["test"])


def near_misses(name: str) -> set[str]:
    out = {
        name + "x",
        "x" + name,
        name[:-1],
        name[1:],
        name + "*",
        "*" + name,
        "=" + name,
        name + "\u2028",
        name.upper(),
        name.lower(),
        name.strip(),
        "*",
        "",
        "x",
        "exec",
        unicodedata.normalize("NFKC", name),
    }
    if name.startswith("="):
        out.add(name[1:])
    return out


def decide(policy, name):
    return Pipeline(policy, None, ()).decide(Call(name, {}, "fs"))


def comments_removed(text: str) -> str:
    """The text without its comments, removed line by line at line feeds (what the writer
    means by a comment); a comment that some reader ends early shows as a difference."""
    out = []
    for line in text.split("\n"):
        if line.lstrip().startswith("#"):
            continue
        cut = line.find("  # ")
        out.append(line if cut < 0 else line[:cut])
    return "\n".join(out)


def test_a_listed_name_cannot_inject_yaml_through_a_comment():
    """The issue's name: U+2028 ended the comment it was written in, and `- '*'` became an entry
    of tools.allow, which then allowed every tool."""
    result = suggested(["read_file"], listed=["audit_helper\u2028    - '*' #", "x\u0085  - '*'", "y\u2029deny: []"])
    policy = load_policy(result.text.encode())
    assert policy.tools.allow == ("read_file",)
    assert decide(policy, "exec").reason_code == "E_TOOL_NOT_ALLOWED"
    assert printable(result.text) and result.text.endswith("\n")


def test_a_called_tool_named_like_a_pattern_is_allowed_alone():
    result = suggested(["*", "x*", "*x", "=eq"])
    policy = load_policy(result.text.encode())
    assert sorted(policy.tools.allow) == ["=*", "=*x", "==eq", "=x*"]
    for name in ("*", "x*", "*x", "=eq"):
        assert decide(policy, name).outcome != "deny"
    for name in ("exec", "xylophone", "ax", "eq", "=*", ""):
        assert decide(policy, name).reason_code == "E_TOOL_NOT_ALLOWED", name


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(names, min_size=1, max_size=5, unique=True), st.lists(names, max_size=3), st.lists(names, max_size=3))
def test_the_suggested_policy_allows_exactly_the_observed_tools(called, denied, listed):
    result = suggested(called, denied=denied, listed=listed)
    text = result.text
    assert printable(text) and text.endswith("\n")
    # the one policy loader, from a file, as wrap reads it
    with tempfile.NamedTemporaryFile("wb", suffix=".yaml", delete=False) as f:
        f.write(text.encode())
    try:
        policy = load_policy_file(f.name)
    finally:
        os.unlink(f.name)
    assert sorted(names_allowed(policy, called)) == sorted(called)
    allowed = set(called)
    for name in allowed:
        assert decide(policy, name).outcome != "deny", name
        said = explain(policy, name, {}, server="fs")
        assert said.agrees and said.verdict != "deny"
    others = set().union(*(near_misses(n) for n in allowed), denied, listed) - allowed
    for name in others:
        assert decide(policy, name).reason_code == "E_TOOL_NOT_ALLOWED", name
        said = explain(policy, name, {}, server="fs")
        assert said.agrees and said.verdict == "deny"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(names, min_size=1, max_size=4, unique=True),
    st.lists(names, max_size=3),
    st.lists(names, max_size=3),
    st.lists(names, min_size=1, max_size=2, unique=True),
)
def test_assays_yaml_reader_and_libyaml_read_the_same_document(called, denied, listed, servers):
    text = suggested(called, denied=denied, listed=listed, servers=[s or "fs" for s in servers]).text
    ours = parse_yaml(text)
    theirs = yaml.load(text, Loader=LIBYAML)
    assert ours == theirs
    # no comment that one reader ends early: without its comments the document reads the same
    assert yaml.load(comments_removed(text), Loader=LIBYAML) == theirs
    assert parse_yaml(comments_removed(text)) == ours


@pytest.mark.parametrize("name", SPECIAL)
def test_each_odd_name_round_trips(name):
    result = suggested([name, "read_file"], listed=[name + "!"])
    policy = load_policy(result.text.encode())
    assert sorted(names_allowed(policy, [name, "read_file"])) == sorted({name, "read_file"})
    assert yaml.load(result.text, Loader=LIBYAML) == parse_yaml(result.text)


def test_a_policy_longer_than_the_ceiling_wrap_reads_is_not_written():
    from assay.logs.suggest import SuggestError

    calls = [entry("t" * 5000 + str(i)) for i in range(3)]
    observed = Observed()
    for c in calls:
        observed.call(c)
    with pytest.raises(SuggestError, match="more than the policy ceiling of 10,000"):
        suggest(observed, lambda: iter(calls), home=None, header=[], ceiling=10_000)
    assert suggest(observed, lambda: iter(calls), home=None, header=[], ceiling=100_000).replayed == 3
