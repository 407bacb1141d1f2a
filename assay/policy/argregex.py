"""The regexes of ``args_match`` (docs/policy.md, "Flow rules"): linear time, whatever the input.

An ``args_match`` regex is written by the policy's author but runs on arguments the client (a
model, possibly steered by a prompt injection) sends, up to the frame limit. Python's ``re``
backtracks: ``.*token`` takes seconds on a 40 KB argument and hours on a few MB, and it holds
the interpreter meanwhile, so one call would stall every frame of the session. So these
regexes run on the engine of JSON Schema ``pattern`` in jsonschema-rs with its standard,
linear-time regex engine: the dialect of the policy's own schemas, without lookaround and
backreferences (refused when the policy loads). Like ``re.search`` it is not anchored; unlike
Python, ``$`` matches only at the very end and ``\\d``, ``\\w``, ``\\s`` are ASCII.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ArgRegex", "ArgRegexError", "compile_arg_regex"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class ArgRegexError(ValueError):
    """The pattern is not a regex of this dialect; the text says why, in one line."""


class ArgRegex:
    """One compiled pattern; ``search(text)`` says whether it matches anywhere in ``text``."""

    __slots__ = ("pattern", "_is_valid")

    def __init__(self, pattern: str, is_valid: Any) -> None:
        self.pattern = pattern
        self._is_valid = is_valid

    def search(self, text: str) -> bool:
        try:
            return bool(self._is_valid(text))
        except UnicodeEncodeError:  # a lone surrogate: a character like any other that no regex names
            return bool(self._is_valid(_SURROGATE.sub("\ufffd", text)))

    def __repr__(self) -> str:
        return f"ArgRegex({self.pattern!r})"


def compile_arg_regex(pattern: str) -> ArgRegex:
    """Compile ``pattern``; raises :class:`ArgRegexError` when it is not a regex of the dialect
    (Python-only syntax such as ``\\Z``, lookaround ``(?=...)``, backreferences ``\\1``)."""
    import jsonschema_rs  # only policies with args_match pay for the import

    if _SURROGATE.search(pattern):
        raise ArgRegexError("invalid regular expression: it holds a lone surrogate")
    try:
        validator = jsonschema_rs.validator_for(
            {"type": "string", "pattern": pattern}, pattern_options=jsonschema_rs.RegexOptions()
        )
    except jsonschema_rs.ValidationError:
        try:  # a typo: Python's reader says where; else it is a construct this dialect refuses
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ArgRegexError(f"invalid regular expression: {exc}") from None
        raise ArgRegexError(
            "regular expression not supported (args_match runs in linear time, in the dialect of "
            "JSON Schema pattern: no lookaround, no backreferences, no \\Z; $ is the very end)"
        ) from None
    except (ValueError, OverflowError) as exc:
        raise ArgRegexError(f"invalid regular expression: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    return ArgRegex(pattern, validator.is_valid)
