"""The text the detectors read, and the way back to the text as it was (docs/inspect.md,
"Normalization").

A hostile server hides a phrase from a pattern without hiding it from the model: one zero-width
space, word joiner or soft hyphen inside a word, fullwidth or mathematical letters, a Cyrillic
``і`` in place of a Latin ``i``. So the injection phrases are looked for in the text with

- every *default-ignorable* code point removed (the Unicode property: zero-width characters,
  joiners, soft hyphen, bidi marks and controls, variation selectors, tag characters, ...);
- every character that NFKC (on its own) makes into text with an ASCII letter or digit in it
  replaced by that text (``ｉ`` -> ``i``, ``𝐢`` -> ``i``, ``ﬁ`` -> ``fi``, ``™`` -> ``TM``);
- every Latin, Greek or Cyrillic letter that looks like an ASCII letter (Unicode's confusables,
  a skeleton restricted to those scripts) replaced by that letter (``і`` -> ``i``, ``ο`` -> ``o``).

Each character of the normalized text comes from exactly one character of the original, so a span
found in it maps back to a span of the original (:class:`Mapped`): what is masked or stripped is
the original's characters, the invisible ones inside the span with them. Secrets are looked for in
the text with only the default-ignorable code points removed (:func:`without_ignorables`).

Normalizing costs a pass in Python, so the detectors ask first (in the one pass of their RE2 set,
with the classes and regexes below) whether it can change what they find: whether the text holds
an anchor of a rule in one of its spellings (:func:`anchor_regex`) and a character that
normalization changes.

Sans-IO and stateless; google-re2 finds the characters to change (Python's ``re`` when it is
missing: the same result, slower). Which characters are removed or replaced, and by what (the
default-ignorable code points, the look-alikes, the table of characters NFKC changes), is
:mod:`assay.inspect.chartable`'s.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any, Final

from assay.inspect.chartable import IGNORABLE, IGNORABLE_SET, ZWSP, table
from assay.inspect.prefilter import encoded

__all__ = [
    "Mapped",
    "anchor_regex",
    "changed_class",
    "changed_runs",
    "for_phrases",
    "ignorable_class",
    "multi_class",
    "reading",
    "single_class",
    "strip_in_words",
    "without_ignorables",
]


def _class(ranges: Sequence[tuple[int, int]]) -> str:
    """A regex character class (Python's ``re`` and RE2 alike) of the code point ``ranges``,
    merged; the characters a class gives a meaning to escaped."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])

    def one(cp: int) -> str:
        char = chr(cp)
        return "\\" + char if char in "\\]^-[" else char

    return "[" + "".join(one(lo) if lo == hi else f"{one(lo)}-{one(hi)}" for lo, hi in merged) + "]"


def _codes(chars: Sequence[str]) -> list[tuple[int, int]]:
    return [(ord(c), ord(c)) for c in chars]


def ignorable_class() -> str:
    """A character class of the default-ignorable code points."""
    return _class(IGNORABLE)


def single_class() -> str:
    """A character class of the characters normalization removes or replaces by one character."""
    return _class([*IGNORABLE, *_codes([c for c, new in table().items() if len(new) == 1])])


def multi_class() -> str:
    """A character class of the characters normalization replaces by more than one (``ﬁ``,
    ``™``, ``⒜``): whichever letters of a word they stand for, their presence is enough."""
    return _class(_codes([c for c, new in table().items() if len(new) > 1]))


def anchor_regex(anchor: str) -> str:
    """A regex (RE2 and Python's ``re`` alike) of ``anchor`` (ASCII) in every spelling that
    normalizes to it with one character for each of its own (a character that stands for several
    is :func:`multi_class`'s), default-ignorable ones between them."""
    if not _SPELLED:
        for source, new in table().items():
            if len(new) == 1:
                _SPELLED.setdefault(new, []).append(source)
    gap = ignorable_class() + "*"
    classes = []
    for char in anchor:
        want = {char.lower(), char.upper()}
        classes.append(_class(_codes(sorted(want | {c for w in want for c in _SPELLED.get(w, ())}))))
    return gap.join(classes)


_SPELLED: dict[str, list[str]] = {}  # a character -> those replaced by it alone


_READINGS: list[tuple[dict[int, str], re.Pattern[str]]] = []


def reading(zwsp_as_space: bool) -> tuple[dict[int, str], re.Pattern[str]]:
    """The ``str.translate`` table of a reading (a zero-width space as nothing, or as a space),
    and a class of the characters it replaces by other than one character."""
    if not _READINGS:
        nothing = {ord(c): "" for c in IGNORABLE_SET}
        nothing.update((ord(c), new) for c, new in table().items())
        multi = [c for c, new in table().items() if len(new) > 1]
        space = {**nothing, ord(ZWSP): " "}
        _READINGS.append((nothing, re.compile(_class([*IGNORABLE, *_codes(multi)]))))
        _READINGS.append(
            (
                space,
                re.compile(
                    _class([*(r for r in IGNORABLE if r != (0x200B, 0x200F)), (0x200C, 0x200F), *_codes(multi)])
                ),
            )
        )
    return _READINGS[zwsp_as_space]


class _Runs:
    """Where the runs of a character class are in a text, as ``str`` spans: RE2 over the text's
    UTF-8 (a DFA: a megabyte in a few milliseconds), or Python's ``re`` without google-re2."""

    __slots__ = ("_class", "_re2", "_re")

    def __init__(self, char_class: str) -> None:
        self._class = char_class
        self._re2: Any = None  # google-re2's compiled regex (untyped)
        self._re: re.Pattern[str] | None = None

    def __call__(self, text: str) -> list[tuple[int, int]]:
        if self._compile():
            assert self._re is not None
            return [match.span() for match in self._re.finditer(text)]
        data = encoded(text)  # the prefilter's copy when it read this text
        out = []
        byte_at = char_at = 0
        for start, end in self.in_bytes(data):
            first = char_at + len(data[byte_at:start].decode("utf-8", "surrogatepass"))
            char_at = first + len(data[start:end].decode("utf-8", "surrogatepass"))
            byte_at = end
            out.append((first, char_at))
        return out

    def in_bytes(self, data: bytes) -> list[tuple[int, int]]:
        """The runs in ``data`` (UTF-8), as spans of it."""
        if self._compile():
            pattern = self._re
            assert pattern is not None
            text = data.decode("utf-8", "surrogatepass")
            out = []
            byte_at = char_at = 0
            for match in pattern.finditer(text):
                first, last = match.span()
                start = byte_at + len(text[char_at:first].encode("utf-8", "surrogatepass"))
                byte_at = start + len(text[first:last].encode("utf-8", "surrogatepass"))
                char_at = last
                out.append((start, byte_at))
            return out
        out = []
        search, anchor, end, at = self._re2.Match, _UNANCHORED[0], len(data), 0
        while True:
            span = search(anchor, data, at, end)[0]
            if span[0] < 0:
                return out
            out.append(span)
            at = span[1]

    def _compile(self) -> bool:
        """Compiled on first use; True when it is Python's ``re`` (no google-re2)."""
        if self._re2 is None and self._re is None:
            try:
                import re2

                options = re2.Options()
                options.log_errors = False
                options.never_capture = True
                self._re2 = re2._re2.RE2((self._class + "+").encode("utf-8"), options)
                if not self._re2.ok():
                    raise ValueError("refused")
                _UNANCHORED.append(re2._re2.RE2.Anchor.UNANCHORED)
            except Exception:  # noqa: BLE001 - Python's re: the same spans, slower
                self._re2 = None
                self._re = re.compile(self._class + "+")
        return self._re is not None


_UNANCHORED: list[Any] = []  # RE2's unanchored search (its enum, once google-re2 is imported)


_IGNORABLE_RUNS: Final = _Runs(ignorable_class())
_CHANGED_RUNS: list[_Runs] = []


def _changed() -> _Runs:
    if not _CHANGED_RUNS:
        _CHANGED_RUNS.append(_Runs(changed_class()))
    return _CHANGED_RUNS[0]


def _changed_runs(text: str) -> list[tuple[int, int]]:
    return _changed()(text)


def changed_class() -> str:
    """A character class of every character normalization removes or replaces."""
    return _class([*IGNORABLE, *_codes(list(table()))])


def changed_runs(data: bytes) -> list[tuple[int, int]]:
    """The runs of characters normalization removes or replaces in ``data`` (a text's UTF-8,
    :func:`~assay.inspect.prefilter.encode`'s), as spans of it."""
    return _changed().in_bytes(data)


class Mapped:
    """A normalized text and the way back: ``span(i, j)`` is the span of the original that
    ``text[i:j]`` came from (the characters removed inside it included, none at its ends).

    The text is made of pieces: a run of the original's characters, each as it is or replaced by
    one character (positions kept), or the replacement of one character (``_norm_at``: where each
    piece starts in ``text``, ``_orig_at``: where it starts in the original, ``_copied``: which
    kind it is)."""

    __slots__ = ("text", "_norm_at", "_orig_at", "_copied")

    def __init__(self, text: str, norm_at: list[int], orig_at: list[int], copied: list[bool]) -> None:
        self.text = text
        self._norm_at = norm_at
        self._orig_at = orig_at
        self._copied = copied

    def start(self, i: int) -> int:
        """Where the character ``text[i]`` comes from."""
        k = bisect_right(self._norm_at, i) - 1
        return self._orig_at[k] + (i - self._norm_at[k] if self._copied[k] else 0)

    def span(self, i: int, j: int) -> tuple[int, int]:
        """The span of the original that ``text[i:j]`` (``i < j``) came from."""
        return self.start(i), self.start(j - 1) + 1


class _Builder:
    __slots__ = ("parts", "norm_at", "orig_at", "copied", "length")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.norm_at: list[int] = []
        self.orig_at: list[int] = []
        self.copied: list[bool] = []
        self.length = 0

    def add(self, piece: str, at: int, copied: bool) -> None:
        if piece:
            self.parts.append(piece)
            self.norm_at.append(self.length)
            self.orig_at.append(at)
            self.copied.append(copied)
            self.length += len(piece)

    def done(self) -> Mapped:
        if not self.parts:
            return Mapped("", [0], [0], [True])
        return Mapped("".join(self.parts), self.norm_at, self.orig_at, self.copied)


def without_ignorables(text: str) -> Mapped | None:
    """``text`` without its default-ignorable code points (what the secret rules read), or None
    when it has none."""
    runs = _IGNORABLE_RUNS(text)
    if not runs:
        return None
    out = _Builder()
    at = 0
    for start, end in runs:
        out.add(text[at:start], at, True)
        at = end
    out.add(text[at:], at, True)
    return out.done()


def for_phrases(
    text: str, drop: Sequence[tuple[int, int]] = (), zwsp_as_space: bool = False, normalize: bool = True
) -> Mapped:
    """``text`` as the phrase rules read it: the spans ``drop`` (sorted, apart: the character
    hits) taken out, and normalized (the module docstring; not when ``normalize`` is false: the
    caller knows that no character of the text would change). With ``zwsp_as_space``, a
    zero-width space becomes a space rather than nothing (a second reading, for a zero-width
    space that stands between two words)."""
    ords, uneven = reading(zwsp_as_space)
    runs = _changed_runs(text) if normalize else []
    # the characters to change, outside the spans taken out: pieces of the text end at both
    edits: list[tuple[int, int, bool]] = [(start, end, False) for start, end in drop]
    edits += [(start, end, True) for start, end in runs]
    edits.sort()
    out = _Builder()
    at = 0
    for start, end, change in edits:
        start = max(start, at)
        if start >= end:
            continue
        out.add(text[at:start], at, True)
        if change:
            run = text[start:end]
            if uneven.search(run) is None:
                out.add(run.translate(ords), start, True)  # one character for one: the run's positions
            else:
                for i, char in enumerate(run):
                    one = char.translate(ords)
                    out.add(one, start + i, len(one) == 1)
        at = end
    out.add(text[at:], at, True)
    return out.done()


# a default-ignorable character between two letters or digits of a word (Latin, Greek,
# Cyrillic, digits): it breaks the word for a pattern, not for a reader
_WORD_CHAR: Final = "0-9A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u052f"
_IN_WORD: Final = re.compile(f"(?<=[{_WORD_CHAR}])" + ignorable_class() + f"{{1,64}}(?=[{_WORD_CHAR}])")


def strip_in_words(text: str) -> str:
    """``text`` without the default-ignorable characters that sit inside a word of Latin, Greek
    or Cyrillic letters and digits (what ``strip`` also removes: docs/inspect.md,
    "Normalization"). Between letters of other scripts (a ZWNJ in Persian, a ZWJ in an emoji
    sequence) they stay."""
    return _IN_WORD.sub("", text)
