"""Where each of many short regexes occurs in a text, in one pass (docs/inspect.md, "Speed").

The detectors look for a rule's match only where it can start: after a literal (``ghp_``,
``authorization``, an anchor word of a phrase) and a few characters around it. Searching for
each of those separately costs a pass over the text per literal (dozens over a text that holds
many of them, such as these docs). A :class:`Trigger` is such a regex: one of a few literal
heads (compared with ASCII case folded, or exactly), then a tail of bounded length. All the
triggers a text needs are searched at once: google-re2 compiles them into one regex whose
automaton reads the text once, and each search from one place past the last hit gives the next
place where some trigger matches (RE2's automaton is an Aho-Corasick automaton over the heads).
Which triggers match at a place is told by its first two bytes (every head has two or more), and
checked only when two triggers share them.

So :meth:`Places.where` gives, for each trigger asked for, every offset of the UTF-8 text at
which it matches, as a search with that trigger alone from every offset would: the callers treat
those offsets as the places a rule is tried at. The same pass can also give the runs of a class
of non-ASCII characters (:class:`Runs`: the characters normalization changes), as spans. Without
google-re2 (or when it refuses the regex), each is searched on its own with Python's ``re``: the
same answer, more passes.

The tails are bounded (no ``*``, no ``+``), so one search reads at most the length of one trigger
past the next hit: the work is linear in the text and the number of hits. The answer for the last
text asked about is kept (as the prefilter keeps its own), so detectors reading one text share the
pass; :meth:`Places.prime` asks for several detectors' triggers at once. Sans-IO; google-re2 is
imported on the first search.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from assay.inspect.prefilter import literal

__all__ = ["SHARED", "Places", "Runs", "Trigger", "char_offsets", "shared_numbers"]

_CACHE_MAX: Final = 16 << 20  # the last text kept for the next detector's question (at most this long)
_COMPILED_MAX: Final = 256  # regexes of trigger subsets kept compiled (cleared when full)


class Trigger:
    """One of the ``heads``, then ``tail``. A head is a literal (ASCII, two or more characters;
    with ``fold``, its ASCII letters in either case), or a literal and a regex that follows it
    (``("pass", "wd|word")``); the regexes are of RE2's and ``re``'s common syntax over bytes,
    ASCII only, and of bounded length (no ``*``, no ``+``). Every match starts with a head's
    literal."""

    __slots__ = ("heads", "tail", "fold", "source", "_re")

    def __init__(self, heads: Sequence[str | tuple[str, str]], tail: str = "", fold: bool = True) -> None:
        pairs = [(head, "") if isinstance(head, str) else head for head in heads]
        if not pairs or any(len(head) < 2 or not head.isascii() for head, _rest in pairs):
            raise ValueError("a trigger's heads are ASCII literals of two or more characters")
        self.heads = tuple(head for head, _rest in pairs)
        self.tail = tail
        self.fold = fold
        alternatives = "|".join(literal(head, fold) + (f"(?:{rest})" if rest else "") for head, rest in pairs)
        self.source = f"(?:{alternatives}){tail}" if tail else f"(?:{alternatives})"
        self._re: re.Pattern[bytes] | None = None

    def _compiled(self) -> re.Pattern[bytes]:
        if self._re is None:
            self._re = re.compile(self.source.encode("ascii"))
        return self._re

    def match(self, data: bytes, at: int) -> bool:
        """Whether the trigger matches ``data`` at ``at`` (Python's ``re``)."""
        return self._compiled().match(data, at) is not None

    def find(self, data: bytes) -> list[int]:
        """Every offset where the trigger matches ``data`` (Python's ``re``, one search per hit)."""
        search, out = self._compiled().search, []
        found = search(data)
        while found is not None:
            out.append(found.start())
            found = search(data, found.start() + 1)
        return out

    def keys(self) -> set[bytes]:
        """The first two bytes of a match, ASCII-lowercased."""
        return {head[:2].lower().encode("ascii") for head in self.heads}

    def __repr__(self) -> str:
        return f"Trigger({self.source!r})"


class Runs:
    """The runs of a class of non-ASCII characters (``char_class()`` makes it, on first use: a
    regex class of RE2's and ``re``'s syntax); :meth:`Places.where` gives them as a flat list
    ``[start, end, ...]`` of offsets. ``fallback`` finds them without google-re2 (the same
    spans). ``name`` tells it from other runs."""

    __slots__ = ("name", "_make", "_source", "fallback")

    def __init__(
        self, name: str, char_class: Callable[[], str], fallback: Callable[[bytes], list[tuple[int, int]]]
    ) -> None:
        self.name = name
        self._make = char_class
        self._source: str | None = None
        self.fallback = fallback

    @property
    def source(self) -> str:
        if self._source is None:
            self._source = f"{self._make()}+"
        return self._source


class _Subset:
    """The regex of some triggers (numbered in a :class:`Places`), and which triggers each
    first two bytes can start."""

    __slots__ = ("by_key", "runs", "search")

    def __init__(self, numbers: tuple[int, ...], items: Sequence[Trigger | Runs]) -> None:
        by_key: dict[bytes, list[int]] = {}
        self.runs = -1  # the number of the Runs asked for (at most one), or -1
        for number in numbers:
            item = items[number]
            if isinstance(item, Runs):
                self.runs = number
                continue
            for key in item.keys():
                by_key.setdefault(key, []).append(number)
        self.by_key = {key: tuple(found) for key, found in by_key.items()}
        self.search: Callable[[bytes, int, int], tuple[int, int]] | None = None
        try:
            import re2

            options = re2.Options()
            options.log_errors = False
            options.never_capture = True
            options.max_mem = 16 << 20
            source = "|".join(items[number].source for number in numbers).encode("utf-8")
            matcher = re2._re2.RE2(source, options)  # the binding's own object: no wrapper per search
            if not matcher.ok():
                return
            match = matcher.Match
            unanchored = re2._re2.RE2.Anchor.UNANCHORED

            def search(data: bytes, at: int, end: int) -> tuple[int, int]:
                span: tuple[int, int] = match(unanchored, data, at, end)[0]
                return span

            self.search = search
        except Exception:  # noqa: BLE001 - no engine or a refused regex: each on its own
            self.search = None


class Places:
    """Triggers (and runs), each numbered in the order added (:meth:`add`); :meth:`where` says
    where each of those asked for matches in a text."""

    __slots__ = ("_items", "_index", "_subsets", "_last")

    def __init__(self) -> None:
        self._items: list[Trigger | Runs] = []
        self._index: dict[str, int] = {}
        self._subsets: dict[frozenset[int], _Subset] = {}
        # the last text, its positions per trigger number (one tuple: read and written whole)
        self._last: tuple[object, dict[int, list[int]]] | None = None

    def add(self, item: Trigger | Runs) -> int:
        """The number of ``item`` (a trigger with the same regex, or runs of the same name, is
        the same)."""
        key = "runs " + item.name if isinstance(item, Runs) else item.source
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self._items)
            self._items.append(item)
        return found

    def where(self, text: object, data: bytes, numbers: Iterable[int]) -> dict[int, list[int]]:
        """For each number in ``numbers``: the offsets of ``data`` (``text`` as UTF-8; ``text``
        says which text it is, for the answer kept) where that trigger matches, in increasing
        order (for a :class:`Runs`: each run's start and end)."""
        last = self._last
        wanted = set(numbers)
        if last is not None and last[0] is text:
            known = last[1]
            missing = wanted.difference(known)
            if not missing:
                return known
            known = {**known, **self._find(data, missing)}
        else:
            known = self._find(data, wanted)
        if len(data) <= _CACHE_MAX:
            self._last = (text, known)
        return known

    def prime(self, text: object, data: bytes, numbers: Iterable[int]) -> None:
        """:meth:`where` for triggers several detectors will ask about ``text``: one pass."""
        self.where(text, data, numbers)

    def _find(self, data: bytes, wanted: set[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {number: [] for number in wanted}
        if not wanted or not data:
            return out
        key = frozenset(wanted)
        subset = self._subsets.get(key)
        if subset is None:
            if len(self._subsets) >= _COMPILED_MAX:
                self._subsets.clear()
            subset = self._subsets[key] = _Subset(tuple(sorted(wanted)), self._items)
        search = subset.search
        items: list[Any] = self._items
        if search is None:  # each on its own, with re
            for number in wanted:
                item = items[number]
                out[number] = (
                    [o for span in item.fallback(data) for o in span] if isinstance(item, Runs) else item.find(data)
                )
            return out
        by_key, runs = subset.by_key, subset.runs
        end = len(data)
        at, stop = search(data, 0, end)
        while at >= 0:
            if data[at] >= 0x80:  # no trigger starts with a byte that is not ASCII: a run
                out[runs] += (at, stop)
                at, stop = search(data, stop, end)
                continue
            starting = by_key.get(data[at : at + 2].lower(), ())
            if len(starting) == 1:  # the one trigger that can start here: the one that matched
                out[starting[0]].append(at)
            else:
                for number in starting:
                    if items[number].match(data, at):
                        out[number].append(at)
            at, stop = search(data, at + 1, end)
        return out


def char_offsets(data: bytes, offsets: Iterable[int]) -> dict[int, int]:
    """Offsets of the UTF-8 ``data`` (each at the start of a character, or its end) -> the
    index of that character in the text, in one pass."""
    out = {}
    at = chars = 0
    for offset in sorted(set(offsets)):
        chars += len(data[at:offset].decode("utf-8", "surrogatepass"))
        at = offset
        out[offset] = chars
    return out


SHARED: Final = Places()
"""The detectors' triggers, in one table: a pass can serve the secret rules and the injection
anchors of one text together."""


def shared_numbers(items: Iterable[Trigger | Runs]) -> list[int]:
    """The numbers of ``items`` in :data:`SHARED`."""
    return [SHARED.add(item) for item in items]
