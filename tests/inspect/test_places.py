"""The one pass that says where the detectors' literals are (docs/inspect.md, "Speed"): for every
trigger asked for, exactly the offsets where a search with that trigger alone (Python's ``re``)
matches, whichever triggers share a place; the runs of the characters normalization changes as
normalize finds them; the same answers without google-re2; one pass for the detectors of one
text."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect import injection, places, secret_rules
from assay.inspect.normalize import changed_class, changed_runs
from assay.inspect.places import Places, Runs, Trigger
from assay.inspect.prefilter import encode
from assay.inspect.scan import scan

# every trigger the detectors use, and a few that start at the same places
TRIGGERS = [
    *{rule.trigger.source: rule.trigger for rule in secret_rules.RULES}.values(),
    *(Trigger([anchor.decode()]) for anchor in sorted({a for rule in injection._ALL for a in rule.anchors})),
    Trigger(["sk-ant-"], fold=False),
    Trigger(["secret"]),
    Trigger(["sec"], "[rR]"),
    Trigger(["ab"]),
    Trigger(["abc"]),
]
PIECES = st.sampled_from(
    [
        "sk-",
        "sk-ant-",
        "secret",
        "SECRET_KEY = ",
        "token:",
        "pass",
        "password=",
        "Authorization: ",
        "bearer ",
        "a1b2c3d4e5f6g7h8",
        "://",
        "ghp_",
        "github_pat_",
        "AKIA",
        "ABCDEFGHIJKLMNOP",
        "eyJ",
        "hf_",
        "api_org_",
        "api_key=",
        "<secret",
        "instruct",
        "inst]",
        "system",
        "sys>>",
        "|>",
        "now",
        "user",
        "assistant",
        "important",
        "abc",
        "ab",
        "k_live_",
        "k_test_",
        "-----BEGIN RSA PRIVATE KEY",
        "xoxb-",
        "accountKey=",
        "pypi-AgE",
        "GOCSPX-",
        "ya29.",
        "AIza",
        "é",
        "\u0456",
        "\uff49",
        "\u200b",
        "\u00ad",
        "\ufb01",
        "\U0001d422",
        "\ud800",
        " ",
        "\n",
        "=",
        ":",
        "x",
    ]
)
TEXTS = st.lists(st.one_of(PIECES, PIECES.map(str.swapcase), st.text(max_size=5)), max_size=40).map("".join)
RUNS = Runs("test", lambda: "[\u00ad\u0456\uff49\u200b\ufb01\U0001d422]", lambda data: [])


@settings(max_examples=400, deadline=None)
@given(TEXTS, st.data())
def test_where_is_every_trigger_searched_alone(text: str, data: st.DataObject) -> None:
    table = Places()
    numbers = [table.add(trigger) for trigger in TRIGGERS]
    wanted = data.draw(st.sets(st.sampled_from(numbers), min_size=1))
    encoded = encode(text)
    found = table.where(text, encoded, wanted)
    for number in wanted:
        assert found[number] == TRIGGERS[numbers.index(number)].find(encoded), TRIGGERS[numbers.index(number)]


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_the_runs_are_those_normalize_finds_in_the_same_pass(text: str) -> None:
    table = Places()
    runs = table.add(Runs("changed", changed_class, changed_runs))
    anchors = [table.add(Trigger([anchor])) for anchor in ("now", "user", "secret")]
    encoded = encode(text)
    found = table.where(text, encoded, [runs, *anchors])
    edges = found[runs]
    assert list(zip(edges[::2], edges[1::2])) == changed_runs(encoded)
    for number, anchor in zip(anchors, ("now", "user", "secret")):
        assert found[number] == Trigger([anchor]).find(encoded)


def test_without_google_re2_the_answers_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "SECRET_KEY = " + "A1b2" * 10 + " now ghp_" + "a1B2" * 9 + " sk-ant-x \u0456nstruct"
    wanted = [Places().add(trigger) for trigger in TRIGGERS]
    with_engine = Places()
    for trigger in TRIGGERS:
        with_engine.add(trigger)
    expected = with_engine.where(text, encode(text), wanted)
    monkeypatch.setitem(sys.modules, "re2", None)  # the import fails: each trigger on its own, with re
    without = Places()
    for trigger in TRIGGERS:
        without.add(trigger)
    assert without.where(text, encode(text), wanted) == expected


def test_a_trigger_head_is_two_ascii_characters_or_more() -> None:
    for heads in (["a"], ["é1"], []):
        with pytest.raises(ValueError):
            Trigger(heads)


def test_the_triggers_of_the_detectors_have_bounded_tails() -> None:
    """A tail of unbounded length would make the searches from one place past the last hit read
    the same text again and again (docs/inspect.md, "Speed")."""
    import re

    for trigger in TRIGGERS:
        source = re.sub(r"\\.", "E", trigger.source)
        source = re.sub(r"\[[^\]]*\]", "C", source)
        assert "*" not in source and "+" not in source, trigger


def test_a_long_text_costs_one_search_per_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hits far apart: one search each, never a search per trigger (the old finders' passes)."""
    calls = []
    table = Places()
    numbers = [table.add(trigger) for trigger in TRIGGERS]
    text = ("x" * 5000 + " token: ") * 20
    original = places._Subset.__init__

    def counting(self: places._Subset, *args: object) -> None:
        original(self, *args)  # type: ignore[arg-type]
        search = self.search
        assert search is not None

        def counted(data: bytes, at: int, end: int) -> tuple[int, int]:
            calls.append(at)
            return search(data, at, end)

        self.search = counted

    monkeypatch.setattr(places._Subset, "__init__", counting)
    found = table.where(text, encode(text), numbers)
    assert sum(map(len, found.values())) == 20 and len(calls) == 21


def test_the_detectors_share_one_pass_per_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """scan asks where both detectors' literals are at once: the secret rules and the injection
    anchors of one text cost one pass, and a long string is read as the very object it is."""
    text = "The user says: now the token: none; see https://user:password@example.com/a. " * 200  # no finding
    scan({"content": [{"type": "text", "text": text}]}, secrets_on=True, injection_on=True)  # compiled
    seen: list[int] = []
    original = places.Places._find

    def spying(self: Places, data: bytes, wanted: set[int]) -> dict[int, list[int]]:
        seen.append(len(wanted))
        return original(self, data, wanted)

    monkeypatch.setattr(places.Places, "_find", spying)
    copy = text[:-1] + text[-1]
    found = scan({"content": [{"type": "text", "text": copy}]}, secrets_on=True, injection_on=True)
    assert found.findings == [] and seen == [4]  # token:, ://, user, now: one pass
    assert places.SHARED._last is not None and places.SHARED._last[0] is copy  # the string itself was read
