"""The normalized reading built from a text's UTF-8 (docs/inspect.md, "Normalization", "Speed"):
the same bytes as ``for_phrases`` makes, the same way back to the text, its anchors where a search
of the reading finds them; and the phrase hits over long texts whose changes lie far apart (the
anchors moved from the text's) are those of every rule over the whole normalized text."""

from __future__ import annotations

import re
from re import _parser as sre_parse  # the parser re compiles with
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect import injection
from assay.inspect.injection import find_injection, find_poison
from assay.inspect.normalize import changed_runs, for_phrases
from assay.inspect.places import Trigger
from assay.inspect.prefilter import encode
from assay.inspect.spliced import splice

sys.path.insert(0, str(Path(__file__).parent))
from test_normalize import NOISY, PIECES, exact  # noqa: E402

ANCHORS = sorted({a for rule in injection._ALL for a in rule.anchors})


@st.composite
def _text_and_drop(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    text = draw(NOISY)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    drop = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a < b]
    return text, drop


@settings(max_examples=400, deadline=None)
@given(_text_and_drop(), st.booleans(), st.booleans(), st.data())
def test_the_spliced_reading_is_for_phrases_reading(
    case: tuple[str, list[tuple[int, int]]], zwsp: bool, normalize: bool, data: st.DataObject
) -> None:
    text, drop = case
    mapped = for_phrases(text, drop, zwsp, normalize=normalize)
    utf8 = text.encode("utf-8", "surrogatepass")
    reading = splice(text, utf8, drop, changed_runs(encode(text)) if normalize else [], zwsp)
    assert reading.data == mapped.text.encode("utf-8", "surrogatepass")
    if not mapped.text:
        return
    # a span of the reading (at character boundaries) maps back as Mapped.span maps it
    i = data.draw(st.integers(0, len(mapped.text) - 1))
    j = data.draw(st.integers(i + 1, len(mapped.text)))
    start = len(mapped.text[:i].encode("utf-8", "surrogatepass"))
    end = len(mapped.text[:j].encode("utf-8", "surrogatepass"))
    assert reading.spans([(start, end)]) == [mapped.span(i, j)]
    # the anchors: those the text holds, moved, and those a change makes
    found = {anchor: Trigger([anchor.decode()]).find(utf8) for anchor in ANCHORS}
    lowered = reading.data.lower()
    expected = {
        anchor: [m.start() for m in re.finditer(b"(?=" + re.escape(anchor) + b")", lowered)] for anchor in ANCHORS
    }
    assert reading.anchors(found, ANCHORS) == expected


FILLER = st.one_of(
    st.integers(0, 1500).map(lambda n: ("lorem ipsum dolor sit amet, " * 60)[:n]),
    st.sampled_from(["now ", "the user ", "system: ", "<important>", "instructions ", "\n"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(PIECES, FILLER), max_size=30).map("".join))
def test_long_texts_with_changes_far_apart_find_what_normalizing_every_text_finds(text: str) -> None:
    assert find_injection(text) == exact(text, injection._INJECTION)
    assert find_poison(text) == exact(text, injection._ALL)


def test_no_rule_looks_further_back_than_its_stretch_gives() -> None:
    """Each rule is searched in its stretches with ``_BEHIND`` bytes before them folded too: a
    look-behind, ``\\b`` or ``^`` must not need more (docs/inspect.md, "Speed")."""

    def behind(items: sre_parse.SubPattern | list) -> int:  # type: ignore[type-arg]
        most = 0
        for op, av in items:
            name = str(op)
            if name in ("ASSERT", "ASSERT_NOT"):
                direction, sub = av
                if direction < 0:
                    most = max(most, sub.getwidth()[1])
                most = max(most, behind(sub))
            elif name == "AT":
                most = max(most, 1)
            elif name in ("SUBPATTERN",):
                most = max(most, behind(av[-1]))
            elif name == "BRANCH":
                most = max([most, *(behind(branch) for branch in av[1])])
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                most = max(most, behind(av[2]))
            elif name == "ATOMIC_GROUP":
                most = max(most, behind(av))
        return most

    for rule in injection._INJECTION + injection._POISON:
        assert behind(sre_parse.parse(rule.source.decode("latin-1"))) <= injection._BEHIND, rule.rule
