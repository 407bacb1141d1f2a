"""Which of several sets of regexes match a text, in one pass (docs/inspect.md, "Speed").

The detectors (:mod:`assay.inspect.secrets`, :mod:`assay.inspect.injection`) can each match only
where one of a few literals occurs (``ghp_``, ``://``, ``bearer`` in any case), or a short regex
around one matches (``secret`` and ``key`` then ``=`` or ``:``). Python has no fast search for
several of them at once: ``re`` tries an alternation at every position, and ``in`` scans the text
once per literal. google-re2's ``Set`` compiles every regex of every set into one automaton and
says in one pass over the text's UTF-8 which of them match anywhere, so a text where none does
costs one call, and a text where some do tells at once which sets to look into.

The regexes are of RE2's dialect (no lookaround, no backreferences), and must stay small for its
automaton: a caller writes them to match wherever what it looks for can be (a superset: an
unbounded ``[^@]*`` rather than the ``{0,256}`` of the exact rule), and :func:`literal` makes one
of a literal. ``which`` takes a ``str`` (encoded to UTF-8; a lone surrogate counts as U+FFFD) or
UTF-8 bytes (a server's line as it came): RE2 reads UTF-8 as code points, so a class such as
``[^ /]`` takes one character, whatever its length in bytes.

Fails open towards more work, never towards less: without google-re2, or when it refuses a
regex or raises, every set counts as matching (the callers then search as if nothing was
filtered out). RE2's set never gives up on a long text (it resets its automaton's cache and goes
on); its memory is capped by ``max_mem``. Sans-IO and stateless; google-re2 is imported on the
first call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["Prefilter", "encode", "encoded", "literal", "own_utf8"]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SPECIAL: Final = frozenset("\\.^$|?*+()[]{}-/")
_MAX_MEM: Final = 32 << 20  # bytes RE2 may use for the set's program and automaton (its cache is reset at the cap)


def literal(text: str, fold: bool = False) -> str:
    """``text`` as a regex; with ``fold``, each ASCII letter matches in either case (``[aA]``),
    and no other letter does."""
    out = []
    for char in text:
        if fold and char.isascii() and char.isalpha():
            out.append(f"[{char.lower()}{char.upper()}]")
        elif char in _SPECIAL:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


class _Engine:
    """Regexes in one RE2 set (each added once, numbered in the order added), compiled again when
    some were added since; and the answer for the last text asked about (the same object: a text
    looked at by several detectors in a row costs one pass).

    A regex RE2 refuses is not added: the caller's set then counts as matching (fails open)."""

    __slots__ = ("_regexes", "_index", "_match", "_count", "_last")

    def __init__(self) -> None:
        self._regexes: list[str] = []
        self._index: dict[str, int] = {}
        self._match: Callable[[bytes], list[int] | None] | None = None
        self._count = -1  # how many regexes the compiled set holds (-1: none compiled; -2: no engine)
        # the last text, its answer, its UTF-8 and whether that is its own (no lone surrogate
        # replaced); one tuple: read and written whole
        self._last: tuple[object, frozenset[int], bytes, bool] | None = None

    def add(self, regex: str) -> int | None:
        """The number of ``regex`` in the set, or None when RE2 refuses it (or is missing)."""
        found = self._index.get(regex)
        if found is not None:
            return found
        try:
            import re2

            re2.compile(regex, _options(re2))
        except Exception:  # noqa: BLE001 - refused or no engine: not in the set
            return None
        self._index[regex] = len(self._regexes)
        self._regexes.append(regex)
        return self._index[regex]

    def hits(self, text: str | bytes) -> frozenset[int] | None:
        """The numbers of the regexes that match somewhere in ``text``; None without an engine."""
        if self._count != len(self._regexes):
            self._compile()
        match = self._match
        if match is None:
            return None
        last = self._last
        if last is not None and last[0] is text:
            return last[1]
        own = True
        if isinstance(text, bytes):
            data = text
        else:  # _encode, inline: the usual short text costs this call and RE2's
            try:
                data = text.encode()
            except UnicodeEncodeError:  # a lone surrogate
                data, own = _SURROGATE.sub("\ufffd", text).encode(), False
        found = match(data)
        hits = frozenset(found) if found else _NONE
        if len(text) <= _CACHE_MAX:
            self._last = (text, hits, data, own)
        return hits

    def encoded(self, text: str, own: bool = False) -> bytes:
        """``text`` as the set read it (UTF-8, a lone surrogate as U+FFFD; with ``own``, as it
        is: ``surrogatepass``): kept with the last answer, so the detectors that go on to read
        the same text need not encode it again."""
        last = self._last
        if last is not None and last[0] is text and (last[3] or not own):
            return last[2]
        return text.encode("utf-8", "surrogatepass") if own else _encode(text)[0]

    def _compile(self) -> None:
        self._last = None
        try:
            import re2

            engine = re2.Set.SearchSet(_options(re2))
            for number, regex in enumerate(self._regexes):
                if engine.Add(regex) != number:
                    raise ValueError("the set numbered a regex out of order")
            engine.Compile()
            # the binding's own Match (the wrapper's only encodes a str, which hits() did)
            self._match = getattr(engine, "_set", engine).Match
            self._count = len(self._regexes)
        except Exception:  # noqa: BLE001 - no fast path: every set counts as matching
            self._match = None
            self._count = len(self._regexes)


def _encode(text: str | bytes) -> tuple[bytes, bool]:
    """``text`` as UTF-8 (a lone surrogate as U+FFFD: one character, three bytes, as with
    ``surrogatepass``), bytes as they are; and whether that is the text's own UTF-8 (no lone
    surrogate)."""
    if isinstance(text, bytes):
        return text, True
    try:
        return text.encode(), True
    except UnicodeEncodeError:  # a lone surrogate
        return _SURROGATE.sub("\ufffd", text).encode(), False


def encode(text: str | bytes) -> bytes:
    """``text`` as the set reads it: UTF-8, a lone surrogate as U+FFFD (one character, three
    bytes, as with ``surrogatepass``); bytes as they are."""
    return _encode(text)[0]


def encoded(text: str) -> bytes:
    """:func:`encode` of ``text``, the set's own copy when it was the last text it read."""
    return _SHARED.encoded(text)


def own_utf8(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate as it is (``surrogatepass``): the set's own copy when
    it was the last text it read and held none (the same offsets as :func:`encoded`)."""
    return _SHARED.encoded(text, own=True)


_NONE: Final[frozenset[int]] = frozenset()
_CACHE_MAX: Final = 16 << 20  # the last text kept for the next detector's question (one, at most this long)


def _options(re2: Any) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    options.max_mem = _MAX_MEM
    return options


_SHARED: Final = _Engine()


class Prefilter:
    """Sets of regexes (each a sequence of alternatives). ``which(text)`` is None when no regex
    of any set matches anywhere in ``text``, else one boolean per set: False only when no regex
    of that set matches. Every Prefilter's regexes are in one shared RE2 set (``shared``), so
    the detectors asking about the same text cost one pass; a Prefilter of its own has its own
    set."""

    __slots__ = ("_make", "_built", "_engine", "_numbers", "_open", "_all")

    def __init__(
        self, sets: Sequence[Sequence[str]] | Callable[[], Sequence[Sequence[str]]], shared: bool = True
    ) -> None:
        """``sets``, or a function that makes them (called on first use: some take a table to
        build)."""
        self._make = sets
        self._built: list[tuple[str, ...]] | None = None
        self._engine = _SHARED if shared else _Engine()
        self._numbers: list[list[int]] | None = None  # each set's regexes, numbered in the engine
        self._open: list[bool] = []  # a set with a regex the engine refused: always matching
        self._all: frozenset[int] | None = None  # every regex's number (None: some set is always matching)

    @property
    def _sets(self) -> list[tuple[str, ...]]:
        if self._built is None:
            made = self._make() if callable(self._make) else self._make
            self._built = [tuple(alternatives) for alternatives in made]
        return self._built

    def _register(self) -> list[list[int]]:
        numbers, refused = [], []
        for alternatives in self._sets:
            added = [self._engine.add(regex) for regex in alternatives]
            numbers.append([n for n in added if n is not None])
            refused.append(None in added)
        self._numbers, self._open = numbers, refused
        self._all = None if any(refused) else frozenset(n for mine in numbers for n in mine)
        return numbers

    @property
    def alternatives(self) -> list[str]:
        """Every regex of every set (a Prefilter of them all in one set says whether any matches)."""
        return [alt for alts in self._sets for alt in alts]

    def which(self, text: str | bytes) -> list[bool] | None:
        numbers = self._numbers if self._numbers is not None else self._register()
        try:
            hits = self._engine.hits(text)
        except Exception:  # noqa: BLE001 - fail towards more work
            hits = None
        if hits is None:
            return [True] * len(numbers)
        if not hits and self._all is not None:  # the usual text: nothing at all
            return None
        out = [refused or not hits.isdisjoint(mine) for mine, refused in zip(numbers, self._open)]
        return out if any(out) else None

    def matcher(self) -> tuple[Callable[[bytes], list[int] | None] | None, frozenset[int] | None, int]:
        """The engine's own match (its set compiled with every regex added so far; None without
        an engine), the numbers of this prefilter's regexes in it (None: the engine refused
        one), and how many regexes the set holds: for a caller that asks :meth:`any`'s question
        itself, and asks again once :attr:`engine_regexes` holds more."""
        if self._numbers is None:
            self._register()
        engine = self._engine
        if engine._count != len(engine._regexes):
            engine._compile()
        return engine._match, self._all, engine._count

    @property
    def engine_regexes(self) -> list[str]:
        """The regexes of the set this prefilter's are in (the list itself: it grows as
        prefilters sharing the set add theirs)."""
        return self._engine._regexes

    def any(self, data: bytes) -> bool:
        """Whether any regex of any set matches somewhere in ``data`` (UTF-8): ``which`` for the
        one answer a caller needs first, with the least work around the engine's pass (the
        answer is not kept for other questions about ``data``). True when the engine is missing
        or fails."""
        if self._numbers is None:
            self._register()
        every = self._all
        engine = self._engine
        if engine._count != len(engine._regexes):
            engine._compile()
        match = engine._match
        if every is None or match is None:
            return True
        try:
            found = match(data)
        except Exception:  # noqa: BLE001 - fail towards more work
            return True
        return found is not None and len(found) > 0 and not every.isdisjoint(found)
