"""Which of several sets of literal strings occur in a text, in one fast pass (docs/inspect.md,
"Secrets", "Speed").

The secret rules (:mod:`assay.inspect.secrets`) can each match only where one of a few literals
occurs (``ghp_``, ``://``, ``bearer`` in any case). Python has no fast search for several
literals at once: ``re`` tries an alternation at every position (~60 us per KiB), and ``in``
scans the text once per literal. The regex engine of jsonschema-rs (Rust's ``regex``: a
multi-literal search, linear time) answers "does any of them occur" in one pass over the text,
so a text without any literal costs one call. It answers yes or no only, so
:meth:`LiteralSets.which` asks it once for all the sets together, then per group of sets, then
per set of the groups that hold a literal.

Fails open towards more work, never towards less: without jsonschema-rs, or when it raises, every
set counts as present (the callers then search as if nothing was filtered out). Lone surrogates
(which Rust strings cannot hold) are replaced by U+FFFD first, which no literal contains.
Sans-IO and stateless; jsonschema-rs is imported on the first call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["LiteralSets"]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SPECIAL: Final = frozenset("\\.^$|?*+()[]{}-/")


def _alternative(literal: str, fold: bool) -> str:
    """``literal`` as a regex of the JSON Schema ``pattern`` dialect; with ``fold``, each ASCII
    letter matches in either case (``[aA]``)."""
    out = []
    for char in literal:
        if fold and char.isascii() and char.isalpha():
            out.append(f"[{char.lower()}{char.upper()}]")
        elif char in _SPECIAL:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


class LiteralSets:
    """Sets of literals; each set is ``(literals, fold)``, ``fold`` meaning ASCII letters match
    in either case. ``which(text)`` is None when no literal of any set occurs in ``text``, else
    one boolean per set: False only when no literal of that set occurs.

    ``groups`` (lists of set indices, together every index once) are asked about first, then the
    sets of the groups whose literals occur: with sets that often occur together in one group,
    fewer passes."""

    __slots__ = ("_sets", "_groups", "_any", "_each", "_ready")

    def __init__(self, sets: Sequence[tuple[Sequence[str], bool]],
                 groups: Sequence[Sequence[int]] | None = None) -> None:
        self._sets = [(tuple(literals), fold) for literals, fold in sets]
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

            def validator(alternatives: list[str]) -> Callable[[str], bool]:
                schema = {"type": "string", "pattern": "|".join(alternatives)}
                is_valid: Callable[[str], bool] = jsonschema_rs.validator_for(
                    schema, pattern_options=jsonschema_rs.RegexOptions()
                ).is_valid
                return is_valid

            each = [[_alternative(lit, fold) for lit in literals] for literals, fold in self._sets]
            self._each = [
                (validator([alt for i in group for alt in each[i]]) if len(self._groups) > 1 else None,
                 [(i, validator(each[i])) for i in group])
                for group in self._groups
            ]
            self._any = validator([alt for alts in each for alt in alts])
        except Exception:  # noqa: BLE001 - no fast path: every set counts as present
            self._any, self._each = None, []

    def which(self, text: str) -> list[bool] | None:
        if not self._ready:
            self._compile()
        present = self._any
        if present is None:
            return [True] * len(self._sets)
        try:
            try:
                if not present(text):
                    return None
            except UnicodeEncodeError:  # a lone surrogate
                text = _SURROGATE.sub("\ufffd", text)
                if not present(text):
                    return None
            out = [False] * len(self._sets)
            for in_group, members in self._each:
                if in_group is None or in_group(text):
                    for i, is_valid in members:
                        out[i] = is_valid(text)
            return out
        except Exception:  # noqa: BLE001 - fail towards more work
            return [True] * len(self._sets)
