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
from typing import Final

__all__ = ["Prefilter", "literal"]

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


class Prefilter:
    """Sets of regexes (each a sequence of alternatives). ``which(text)`` is None when no regex
    of any set matches anywhere in ``text``, else one boolean per set: False only when no regex
    of that set matches."""

    __slots__ = ("_sets", "_owner", "_match", "_ready")

    def __init__(self, sets: Sequence[Sequence[str]]) -> None:
        self._sets = [tuple(alternatives) for alternatives in sets]
        self._owner: list[int] = []  # the set of each regex, in the order RE2 numbers them
        self._match: Callable[[bytes], list[int] | None] | None = None
        self._ready = False

    def _compile(self) -> None:
        self._ready = True
        try:
            import re2

            options = re2.Options()
            options.log_errors = False
            options.never_capture = True
            options.max_mem = _MAX_MEM
            engine = re2.Set.SearchSet(options)
            owner: list[int] = []
            for i, alternatives in enumerate(self._sets):
                for alternative in alternatives:
                    if engine.Add(alternative) != len(owner):
                        raise ValueError("the set numbered a regex out of order")
                    owner.append(i)
            engine.Compile()
            self._owner = owner
            self._match = engine.Match
        except Exception:  # noqa: BLE001 - no fast path: every set counts as matching
            self._match = None

    @property
    def alternatives(self) -> list[str]:
        """Every regex of every set (a Prefilter of them all in one set says whether any matches)."""
        return [alt for alts in self._sets for alt in alts]

    def which(self, text: str | bytes) -> list[bool] | None:
        if not self._ready:
            self._compile()
        match = self._match
        if match is None:
            return [True] * len(self._sets)
        try:
            if isinstance(text, str):
                try:
                    data = text.encode()
                except UnicodeEncodeError:  # a lone surrogate
                    data = _SURROGATE.sub("\ufffd", text).encode()
            else:
                data = text
            hits = match(data)
            if not hits:
                return None
            out = [False] * len(self._sets)
            owner = self._owner
            for hit in hits:
                out[owner[hit]] = True
            return out
        except Exception:  # noqa: BLE001 - fail towards more work
            return [True] * len(self._sets)
