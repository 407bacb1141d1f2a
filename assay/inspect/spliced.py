"""The text the phrase rules read, built as bytes from the text's own UTF-8 (docs/inspect.md,
"Normalization" and "Speed").

:func:`assay.inspect.normalize.for_phrases` makes the normalized reading of a text as a ``str``
(the invisible and terminal hits taken out, the characters normalization changes replaced), and
the phrase rules read it encoded as UTF-8, ASCII letters lowercased. Most of a long text is
copied as it is: in these docs a megabyte holds a few dozen characters normalization changes.
:func:`splice` builds the same bytes from the text's UTF-8, the stretches between the changes
copied, and says what the phrase search needs besides:

- where the anchors are in the reading (:meth:`Spliced.anchors`): those the text holds inside a
  copied stretch, moved, and those found near the places where the reading differs (an anchor
  that a replacement or a removal makes);
- which characters of the text a span of the reading came from (:meth:`Spliced.spans`, as
  :meth:`~assay.inspect.normalize.Mapped.span` says).

So the work is a copy of the text and a translation of its bytes, not a pass of Python over its
characters nor a new search for every anchor. tests/inspect/test_normalize.py compares the hits
with those of every rule over the whole reading made by ``for_phrases``. Sans-IO and stateless.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

from assay.inspect.normalize import reading
from assay.inspect.places import char_offsets

__all__ = ["Spliced", "splice"]


class Spliced:
    """A reading as UTF-8 (``data``) and its pieces: each a stretch of the text's UTF-8
    copied, or the replacement of one character of the text."""

    __slots__ = ("data", "_utf8", "_m_at", "_r_at", "_copied")

    def __init__(self, data: bytes, utf8: bytes, m_at: list[int], r_at: list[int], copied: list[bool]) -> None:
        self.data = data
        self._utf8 = utf8
        self._m_at = m_at  # where each piece starts in the reading
        self._r_at = r_at  # and in the text's UTF-8 (a replacement: its character's first byte)
        self._copied = copied

    def anchors(self, found: dict[bytes, list[int]], anchors: Iterable[bytes]) -> dict[bytes, list[int]]:
        """Where each of ``anchors`` is in the reading, in increasing order: ``found`` (their
        offsets in the text's UTF-8; an anchor is ASCII, matched in any case) moved, for those
        inside a copied piece; and every one within an anchor's length of a place where the
        reading differs from the text (an anchor that crosses it or stands in a replacement)."""
        anchors = list(anchors)
        m_at, r_at, copied, data = self._m_at, self._r_at, self._copied, self.data
        size = len(data)
        ends = m_at[1:] + [size]
        kept = [k for k in range(len(m_at)) if copied[k]]
        kept_at = [r_at[k] for k in kept]
        out: dict[bytes, set[int]] = {}
        for anchor in anchors:
            n = len(anchor)
            moved = out[anchor] = set()
            for at in found.get(anchor, ()):
                i = bisect_right(kept_at, at) - 1
                if i >= 0:
                    k = kept[i]
                    if at + n <= r_at[k] + ends[k] - m_at[k]:
                        moved.add(m_at[k] + at - r_at[k])
        # around every place the reading differs: where a piece after the first starts (copied
        # pieces meet where something was taken out), and each replacement whole
        longest = max((len(anchor) for anchor in anchors), default=1)
        regions = sorted(
            (max(0, start - longest + 1), min(size, (start if copied[k] else ends[k]) + longest - 1))
            for k, start in enumerate(m_at)
            if k or not copied[k]
        )
        merged: list[tuple[int, int]] = []
        for lo, hi in regions:
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        for lo, hi in merged:
            near = data[lo:hi].lower()  # an anchor is ASCII: found in any case
            for anchor in anchors:
                at = near.find(anchor)
                while at >= 0:
                    out[anchor].add(lo + at)
                    at = near.find(anchor, at + 1)
        return {anchor: sorted(positions) for anchor, positions in out.items()}

    def spans(self, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """Each ``(start, end)`` of the reading (``start < end``, at character boundaries) as
        the span of the text it came from (:meth:`~assay.inspect.normalize.Mapped.span`'s):
        from the character of its first byte to the one of its last, the characters taken out
        inside it included."""
        m_at, r_at, copied, utf8 = self._m_at, self._r_at, self._copied, self._utf8
        ends = []  # per span: the offsets of the text's UTF-8 where it starts and ends
        for start, end in spans:
            first = bisect_right(m_at, start) - 1
            last = bisect_right(m_at, end - 1) - 1
            # a replacement: from its character, to the end of it
            ends.append(
                (
                    r_at[first] + (start - m_at[first] if copied[first] else 0),
                    r_at[last] + (end - m_at[last] if copied[last] else _length(utf8, r_at[last])),
                )
            )
        index = char_offsets(utf8, [offset for pair in ends for offset in pair])
        return [(index[a], index[b]) for a, b in ends]


def _length(utf8: bytes, at: int) -> int:
    """The length in bytes of the UTF-8 character at ``at`` (a lone surrogate's is three)."""
    lead = utf8[at]
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _byte_offsets(text: str, positions: Iterable[int]) -> dict[int, int]:
    """Indices of ``text`` -> offsets in its UTF-8 (surrogatepass), in one pass."""
    out = {}
    at = byte_at = 0
    for position in sorted(set(positions)):
        byte_at += len(text[at:position].encode("utf-8", "surrogatepass"))
        at = position
        out[position] = byte_at
    return out


def splice(
    text: str, utf8: bytes, drop: Sequence[tuple[int, int]], runs: Sequence[tuple[int, int]], zwsp_as_space: bool
) -> Spliced:
    """The reading ``for_phrases(text, drop, zwsp_as_space)`` makes, as UTF-8, built from
    ``utf8`` (``text`` encoded with ``surrogatepass``). ``drop``: the spans of ``text`` taken out (sorted, apart); ``runs``:
    the runs of characters normalization changes, as spans of ``utf8``
    (``normalize.changed_runs``; none: the text is not normalized)."""
    ords, _uneven = reading(zwsp_as_space)
    where = _byte_offsets(text, (p for span in drop for p in span)) if drop else {}
    edits = sorted(
        [(where[start], where[end], False) for start, end in drop] + [(start, end, True) for start, end in runs]
    )
    parts: list[bytes] = []
    m_at: list[int] = []
    r_at: list[int] = []
    copied: list[bool] = []
    m = at = 0
    for start, end, change in edits:
        start = max(start, at)  # overlaps what was done: from where that ended
        if start >= end:
            continue
        if start > at:
            parts.append(utf8[at:start])
            m_at.append(m)
            r_at.append(at)
            copied.append(True)
            m += start - at
        if change:
            b = start
            for char in utf8[start:end].decode("utf-8", "surrogatepass"):
                one = char.translate(ords)
                if one:
                    piece = one.encode("utf-8", "surrogatepass")
                    parts.append(piece)
                    m_at.append(m)
                    r_at.append(b)
                    copied.append(False)
                    m += len(piece)
                b += len(char.encode("utf-8", "surrogatepass"))
        at = end
    if at < len(utf8) or not parts:
        parts.append(utf8[at:])
        m_at.append(m)
        r_at.append(at)
        copied.append(True)
    return Spliced(b"".join(parts), utf8, m_at, r_at, copied)
