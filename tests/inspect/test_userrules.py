"""The policy's own secret rules (docs/inspect.md, "Secrets", "Your own rules"): the word (or the
part of it) a rule matches is masked, the whole text when the rule only matches across white
space; bad rules are refused in one line; the spans merge with the built-in ones."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect import userrules
from assay.inspect.secrets import Secret
from assay.inspect.userrules import UserRule, UserRules, find_all, redact_all

KEY = "acme_" + "Ab3" * 10 + "xy"  # acme_ and 32 letters and digits
ACME = UserRules([UserRule("acme_key", "acme_[A-Za-z0-9]{32}")])


def test_a_word_is_masked() -> None:
    text = f"the key {KEY} works"
    assert ACME.find(text) == [Secret("acme_key", 8, 8 + len(KEY))]
    assert redact_all(text, ACME) == ("the key [REDACTED:acme_key] works", ["acme_key"])


def test_only_the_part_after_a_label_or_inside_quotes_is_masked() -> None:
    assert redact_all(f"ACME_KEY={KEY}", ACME)[0] == "ACME_KEY=[REDACTED:acme_key]"
    assert redact_all(f'{{"key":"{KEY}","n":1}}', ACME)[0] == '{"key":"[REDACTED:acme_key]","n":1}'
    assert redact_all(f"key:{KEY};", ACME)[0] == "key:[REDACTED:acme_key];"


def test_a_word_is_masked_whole_when_no_part_matches() -> None:
    rule = UserRules([UserRule("pair", "id=[0-9]{4}:[a-z]{4}")])
    assert redact_all("x id=1234:abcd, y", rule)[0] == "x [REDACTED:pair] y"


def test_two_words() -> None:
    text = f"{KEY}\n and\t{KEY}, {KEY}."
    n = len(KEY)
    assert ACME.find(text) == [
        Secret("acme_key", 0, n),
        Secret("acme_key", n + 6, 2 * n + 6),
        Secret("acme_key", 2 * n + 8, 3 * n + 9),
    ]  # the word "<key>." is masked whole
    assert redact_all(text, ACME)[0] == "[REDACTED:acme_key]\n and\t[REDACTED:acme_key], [REDACTED:acme_key]"


def test_a_pattern_across_white_space_masks_the_whole_text() -> None:
    rule = UserRules([UserRule("passphrase", "correct horse battery")])
    text = "the phrase is correct horse battery staple"
    assert rule.find(text) == [Secret("passphrase", 0, len(text))]
    assert redact_all(text, rule) == ("[REDACTED:passphrase]", ["passphrase"])


def test_no_match_no_span() -> None:
    assert ACME.find("acme_short and nothing else") == []
    assert ACME.find("") == []
    assert UserRules([]).find(KEY) == []
    assert redact_all("plain", None) == ("plain", [])


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (UserRule("Acme", "x"), "a kind is a lowercase letter"),
        (UserRule("1acme", "x"), "a kind is a lowercase letter"),
        (UserRule("a" * 65, "x"), "a kind is a lowercase letter"),
        (UserRule("acme-key", "x"), "a kind is a lowercase letter"),
        (UserRule("", "x"), "a kind is a lowercase letter"),
        (UserRule("github_token", "x"), "github_token is a built-in kind"),
        (UserRule("password", "x"), "password is a built-in kind"),
        (UserRule("depth_limit", "x"), "depth_limit is a built-in kind"),
        (UserRule("acme", "(?=x)y"), "not supported"),
        (UserRule("acme", "(x"), "invalid regular expression"),
        (UserRule("acme", "(x)\\1"), "not supported"),
        (UserRule("acme", "x\\1"), "invalid regular expression"),
        (UserRule("acme", "x*"), "matches the empty string"),
    ],
)
def test_bad_rules_are_refused_in_one_line(rule: UserRule, why: str) -> None:
    with pytest.raises(ValueError) as info:
        UserRules([UserRule("fine", "zz"), rule])
    message = str(info.value)
    assert message.startswith(f"secret rule 2 ({rule.kind!r}): ") and why in message and "\n" not in message


def test_merged_with_the_built_in_spans() -> None:
    token = "ghp_" + "a" * 36
    text = f"{token} {KEY}"
    assert find_all(text, ACME) == [Secret("github_token", 0, 40), Secret("acme_key", 41, 41 + len(KEY))]
    assert redact_all(text, ACME)[0] == "[REDACTED:github_token] [REDACTED:acme_key]"
    # a user rule whose word holds a built-in secret: one span, of the kind that starts first
    wide = UserRules([UserRule("blob", "blob:[a-z_0-9]{10}")])
    text = f"x blob:{token}"
    assert find_all(text, wide) == [Secret("blob", 2, len(text))]
    # at one start, the longer; at one start and end, the built-in
    same = UserRules([UserRule("mine", "ghp_a{36}")])
    assert find_all(token, same) == [Secret("github_token", 0, 40)]
    assert find_all(text, None) == [Secret("github_token", 7, len(text))]


def test_anchors_are_the_ends_of_the_text() -> None:
    rule = UserRules([UserRule("whole", "^acme_[a-z]{4}$")])
    assert rule.find("acme_abcd") == [Secret("whole", 0, 9)]
    assert rule.find("x acme_abcd") == []  # the regex does not match the text: the rule does not apply
    # applies (the text ends with the key), and the word is masked on its own
    assert UserRules([UserRule("tail", "acme_[a-z]{4}$")]).find("key acme_abcd") == [Secret("tail", 4, 13)]


def test_edge_regexes_are_tried_word_by_word() -> None:
    def local(regex: str) -> bool:
        return UserRules([UserRule("x", regex)])._rules[0].local

    assert local("acme_[^ ]{4}") and local("[^\\s]{3}x") and local("a\\d+")
    assert not any(local(r) for r in ["^abc", "abc$", "\\babc", "a\\Bb", "\\[^abc", "\\Aabc"])
    # a word that matches an edge regex in a chunk that does not: still masked
    rule = UserRules([UserRule("w", "^acme_[a-z]{4}|zz$")])
    text = "acme_abcd " + "filler " * 2000 + "zz"
    assert [s.start for s in rule.find(text)] == [0, len(text) - 2]


# a reference: every word tried on its own with Python's re (the same for these simple regexes)
def reference(regex: str, text: str) -> list[tuple[int, int]]:
    pattern = re.compile(regex)
    if not pattern.search(text):
        return []
    spans = []
    for word in re.finditer(r"\S+", text):
        if pattern.search(word.group()):
            parts = [
                (word.start() + m.start(), word.start() + m.end())
                for m in re.finditer(r"[^\s\"'`,;=:()\[\]{}<>]+", word.group())
                if pattern.search(m.group())
            ]
            spans.extend(parts or [word.span()])
    return spans or [(0, len(text))]


WORDS = st.sampled_from(
    [
        KEY,
        "acme_",
        "x",
        "acme_abc",
        "=",
        ":",
        '"',
        " ",
        "\n",
        "  ",
        "é",
        "\ud800",
        "-" * 300,
        "word " * 900,
        "k=" + KEY,
        KEY + "," + KEY,
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, max_size=12).map("".join), st.sampled_from(["acme_[A-Za-z0-9]{32}", "acme_[a-c]{3}", "x"]))
def test_spans_are_those_of_trying_every_word(text: str, regex: str) -> None:
    rules = UserRules([UserRule("k", regex)])
    expected = reference(regex, text.replace("\ud800", "\ufffd"))
    assert [(s.start, s.end) for s in rules.find(text)] == sorted(set(expected))


def test_linear_time() -> None:
    # CPU time of this process: the other test worker or another job on the machine does not count
    start = time.process_time()
    UserRules([UserRule("ab", "ab")]).find("ab " * 300_000)  # every word masked
    UserRules([UserRule("five", "a{5}")]).find("a" * 1_000_000)  # one huge word
    UserRules([UserRule("spread", "x y")]).find("x y " * 200_000)  # across white space: the whole text
    UserRules([UserRule("edge", "^ab")]).find("ab " * 300_000)  # word by word
    assert time.process_time() - start < 10.0


def test_chunks_cover_every_word_once() -> None:
    words = [(i * 10, i * 10 + (5000 if i % 7 == 0 else 5)) for i in range(3000)]
    covered = [i for lo, hi in userrules._chunks(words) for i in range(lo, hi)]
    assert covered == list(range(len(words)))
