"""The policy's own secret rules (docs/inspect.md, "Secrets", "Your own rules").

A user rule is a kind and a regex of the linear-time dialect of flow rules
(:mod:`assay.policy.argregex`: jsonschema-rs, which answers only "matches somewhere", no
spans). So the spans come from tokens:

1. A rule applies to a text when its regex matches the text (anywhere; ``^`` and ``$`` are the
   text's ends). Otherwise it masks nothing.
2. In a text it applies to, every *word* (a maximal run of non-white-space characters) that the
   regex matches on its own is looked into: each of its *parts* (the word split at quotes,
   commas, semicolons, ``=``, ``:`` and brackets) that the regex matches on its own is masked;
   if no part does, the whole word is.
3. If the regex matches no word on its own (it spans white space), the whole text is masked:
   fail closed.

Linear: each character is tried in the text, in one chunk of about 4 KiB (words that lie in a
chunk the regex does not match are skipped, unless the regex can look at the edges of what it
is tried on: ``^``, ``$``, ``\\b``, ...), in one word and in one part. Sans-IO and stateless.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Final, NamedTuple

from assay.inspect.secrets import KEY_KINDS, KINDS, Secret, find_secrets, merge_spans, replace_spans
from assay.policy.argregex import ArgRegex, ArgRegexError, compile_arg_regex

__all__ = ["UserRule", "UserRules", "find_all", "redact_all"]

_KIND: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
_BUILT_IN: Final = frozenset(KINDS) | frozenset(KEY_KINDS) | {"depth_limit"}
_WORD: Final = re.compile(r"\S+")
_PART: Final = re.compile(r"[^\s\"'`,;=:()\[\]{}<>]+")
_CHUNK: Final = 4096  # characters of words tried together before each word is
# what can make a regex match a word but not a longer text holding it: ^ (but for the opening
# "[^" of a negated class, not after a backslash), $, \A, \z, \Z, \b, \B, \<, \>
_NEGATED: Final = re.compile(r"(?<!\\)\[\^")
_EDGES: Final = re.compile(r"[\^$]|\\[AzZbB<>]")


class UserRule(NamedTuple):
    """One rule of the policy: the ``kind`` its secrets are masked as, and its ``regex``."""

    kind: str
    regex: str


class _Compiled(NamedTuple):
    kind: str
    regex: ArgRegex
    local: bool  # matching a word implies matching any text that holds it


class UserRules:
    """The policy's secret rules, compiled; ``find(text)`` gives the spans they mask."""

    __slots__ = ("_rules", "_any")

    def __init__(self, rules: Sequence[UserRule]) -> None:
        """Raises ValueError (one line: which rule, why) for a kind that is not
        ``[a-z][a-z0-9_]{0,63}`` or is a built-in kind, or a regex the dialect refuses or that
        matches the empty string (it would mask everything)."""
        compiled = []
        for number, (kind, regex) in enumerate(rules, 1):
            where = f"secret rule {number} ({kind!r})"
            if not isinstance(kind, str) or not _KIND.fullmatch(kind):
                raise ValueError(f"{where}: a kind is a lowercase letter, then up to 63 of a-z, 0-9 and _")
            if kind in _BUILT_IN:
                raise ValueError(f"{where}: {kind} is a built-in kind; choose another name")
            if not isinstance(regex, str):
                raise ValueError(f"{where}: the regex must be a string")
            try:
                arg_regex = compile_arg_regex(regex)
            except ArgRegexError as exc:
                raise ValueError(f"{where}: {exc}") from None
            if arg_regex.search(""):
                raise ValueError(f"{where}: the regex matches the empty string, so it would mask everything")
            compiled.append(_Compiled(kind, arg_regex, _EDGES.search(_NEGATED.sub("[", regex)) is None))
        self._rules: tuple[_Compiled, ...] = tuple(compiled)
        self._any: ArgRegex | None = None
        if len(compiled) > 1:
            try:  # one pass for the text no rule applies to
                self._any = compile_arg_regex("|".join(f"(?:{rule.regex.pattern})" for rule in compiled))
            except ArgRegexError:
                self._any = None

    def __len__(self) -> int:
        return len(self._rules)

    def find(self, text: str) -> list[Secret]:
        """The spans to mask in ``text``, sorted, never overlapping (overlaps merged as
        :func:`~assay.inspect.secrets.find_secrets` does; at one start the rule listed first)."""
        if not self._rules or (self._any is not None and not self._any.search(text)):
            return []
        found: list[tuple[int, int, int, str]] = []
        words: list[tuple[int, int]] | None = None
        for order, rule in enumerate(self._rules):
            if not rule.regex.search(text):
                continue
            if words is None:
                words = [match.span() for match in _WORD.finditer(text)]
            spans = list(_spans(rule, text, words)) or [(0, len(text))]
            found.extend((start, -end, order, rule.kind) for start, end in spans)
        return merge_spans(found)


def _chunks(words: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of word indices, each about ``_CHUNK`` characters or one word."""
    lo = 0
    while lo < len(words):
        hi, start = lo + 1, words[lo][0]
        while hi < len(words) and words[hi][1] - start <= _CHUNK:
            hi += 1
        yield lo, hi
        lo = hi


def _spans(rule: _Compiled, text: str, words: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The words (or their parts) of ``text`` that ``rule`` matches on its own."""
    search = rule.regex.search
    ranges = _chunks(words) if rule.local else iter([(0, len(words))])
    for lo, hi in ranges:
        if rule.local and hi - lo > 1 and not search(text[words[lo][0] : words[hi - 1][1]]):
            continue
        for start, end in words[lo:hi]:
            word = text[start:end]
            if not search(word):
                continue
            parts = [match.span() for match in _PART.finditer(word)]
            masked = False
            if parts != [(0, len(word))]:
                for a, b in parts:
                    if search(word[a:b]):
                        masked = True
                        yield start + a, start + b
            if not masked:
                yield start, end


def find_all(text: str, user: UserRules | None) -> list[Secret]:
    """The built-in secrets of ``text`` and the spans of the policy's rules, merged (overlaps
    become one span of the kind that starts first; at one start the longer, then the built-in)."""
    built_in = find_secrets(text)
    if user is None or not len(user):
        return built_in
    mine = user.find(text)
    if not mine:
        return built_in
    return merge_spans([(s.start, -s.end, 0, s.kind) for s in built_in] + [(s.start, -s.end, 1, s.kind) for s in mine])


def redact_all(text: str, user: UserRules | None) -> tuple[str, list[str]]:
    """``text`` with every span of :func:`find_all` replaced by ``[REDACTED:<kind>]``, and the
    kinds replaced, in order (as :func:`~assay.inspect.secrets.redact_text`)."""
    return replace_spans(text, find_all(text, user))
