"""scan's first look over a value (docs/inspect.md, "Where wrap looks", "Speed"): its short
strings together, each long one on its own and as the very object it is (never copied into one
text with the others); it says "nothing" only when no string holds a finding."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect import injection, scan as scan_module
from assay.inspect.scan import scan
from assay.inspect.secrets import find_secrets

sys.path.insert(0, str(Path(__file__).parent))
from test_normalize import PIECES as PHRASES  # noqa: E402
from test_secrets import _NOISE  # noqa: E402

TEXTS = st.lists(st.one_of(PHRASES, _NOISE, st.text(max_size=5)), max_size=12).map("".join)


def test_a_long_string_is_read_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    long = "The report is due on Monday; the user asked now. " * 20_000  # a megabyte, no finding
    seen: list[str] = []

    def spy(name: str) -> object:
        original = getattr(scan_module, name)

        def spying(text: str) -> object:
            seen.append(text)
            return original(text)

        return spying

    monkeypatch.setattr(scan_module, "find_secrets", spy("find_secrets"))
    monkeypatch.setattr(scan_module, "find_injection", spy("find_injection"))
    found = scan({"content": [{"type": "text", "text": long}]}, secrets_on=True, injection_on=True)
    assert found.findings == []
    assert any(text is long for text in seen)  # the string itself, not a copy joined with "content", "text", ...
    assert all(len(text) < 1000 for text in seen if text is not long)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(TEXTS, st.sampled_from(["x" * 4096, "ok", "content", "text"])), min_size=1, max_size=5),
    st.booleans(),
    st.booleans(),
)
def test_the_fast_look_finds_what_each_string_holds(texts: list[str], secrets_on: bool, injection_on: bool) -> None:
    """scan's first look over a value (its short strings together, each long one alone) says
    "nothing" only when no string holds a finding."""
    value = {f"k{i}": text + ("y" * 5000 if i % 2 else "") for i, text in enumerate(texts)}
    found = scan(value, secrets_on=secrets_on, injection_on=injection_on)
    strings = [s for pair in value.items() for s in pair]
    expected = any((secrets_on and find_secrets(s)) or (injection_on and injection.find_injection(s)) for s in strings)
    assert bool(found.findings) == bool(expected)
