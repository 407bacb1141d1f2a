"""Which of several sets of regexes match a text, in one fast pass (docs/inspect.md, "Secrets",
"Speed").

The secret rules (:mod:`assay.inspect.secrets`) can each match only where one of a few literals
occurs (``ghp_``, ``://``, ``bearer`` in any case), or a short regex around one matches
(``secret`` and ``key`` then ``=`` or ``:``). Python has no fast search for several of them at
once: ``re`` tries an alternation at every position (~60 us per KiB), and ``in`` scans the text
once per literal. The regex engine of jsonschema-rs (Rust's ``regex``: linear time, a
multi-literal search for the literals its regexes start with) answers "does any of them match"
in one pass over the text, so a text where none does costs one call. It answers yes or no only,
so :meth:`Prefilter.which` asks once for all the sets together, then per group of sets, then per
set of the groups that match.

The regexes are of the JSON Schema ``pattern`` dialect (docs/policy.md, "Flow rules"); a caller
writes them to match wherever what it looks for can be (a superset), and :func:`literal` makes
one of a literal. Fails open towards more work, never towards less: without jsonschema-rs, or
when it raises, every set counts as matching (the callers then search as if nothing was filtered
out). Lone surrogates (which Rust strings cannot hold) are replaced by U+FFFD first. Sans-IO and
stateless; jsonschema-rs is imported on the first call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["Prefilter", "literal"]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SPECIAL: Final = frozenset("\\.^$|?*+()[]{}-/")


def literal(text: str, fold: bool = False) -> str:
    """``text`` as a regex of the JSON Schema ``pattern`` dialect; with ``fold``, each ASCII
    letter matches in either case (``[aA]``), and no other letter does."""
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
    of that set matches.

    ``groups`` (lists of set indices, together every index once) are asked about first, then the
    sets of the groups that match: with sets that often match together in one group, fewer
    passes."""

    __slots__ = ("_sets", "_groups", "_any", "_each", "_ready")

    def __init__(self, sets: Sequence[Sequence[str]], groups: Sequence[Sequence[int]] | None = None) -> None:
        self._sets = [tuple(alternatives) for alternatives in sets]
        self._groups = [list(group) for group in groups] if groups else [list(range(len(self._sets)))]
        if sorted(i for group in self._groups for i in group) != list(range(len(self._sets))):
            raise ValueError("the groups must hold every set once")
        self._any: Callable[[str], bool] | None = None
        self._each: list[tuple[Callable[[str], bool] | None, list[tuple[int, Callable[[str], bool]]]]] = []
        self._ready = False

    def _compile(self) -> None:
        self._ready = True
        try:
            import jsonschema_rs

            def validator(alternatives: Sequence[str]) -> Callable[[str], bool]:
                schema = {"type": "string", "pattern": "|".join(f"(?:{alt})" for alt in alternatives)}
                is_valid: Callable[[str], bool] = jsonschema_rs.validator_for(
                    schema, pattern_options=jsonschema_rs.RegexOptions()
                ).is_valid
                return is_valid

            sets, groups = self._sets, self._groups
            self._each = [
                (validator([alt for i in group for alt in sets[i]]) if len(groups) > 1 else None,
                 [(i, validator(sets[i])) for i in group])
                for group in groups
            ]
            self._any = validator([alt for alts in sets for alt in alts])
        except Exception:  # noqa: BLE001 - no fast path: every set counts as matching
            self._any, self._each = None, []

    @property
    def alternatives(self) -> list[str]:
        """Every regex of every set (a Prefilter of them all in one set says whether any matches)."""
        return [alt for alts in self._sets for alt in alts]

    def which(self, text: str) -> list[bool] | None:
        if not self._ready:
            self._compile()
        matches = self._any
        if matches is None:
            return [True] * len(self._sets)
        try:
            try:
                if not matches(text):
                    return None
            except UnicodeEncodeError:  # a lone surrogate
                text = _SURROGATE.sub("\ufffd", text)
                if not matches(text):
                    return None
            out = [False] * len(self._sets)
            for in_group, members in self._each:
                if in_group is None or in_group(text):
                    for i, is_valid in members:
                        out[i] = is_valid(text)
            return out
        except Exception:  # noqa: BLE001 - fail towards more work
            return [True] * len(self._sets)
