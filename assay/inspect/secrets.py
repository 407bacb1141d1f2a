"""Secrets in text and JSON values: find them, redact them (docs/inspect.md, "Secrets").

A rule set written for this project (:mod:`assay.inspect.secret_rules`): each rule has a
``kind`` (the table :data:`KINDS`, also in docs/inspect.md) and one regular expression that runs
in linear time (tests/inspect/test_secrets.py feeds them long adversarial inputs under a time
limit).

- :func:`find_secrets`: the secrets of one string, as ``(kind, start, end)`` spans, sorted,
  never overlapping (overlapping matches are merged: no part of a secret is left out).
- :func:`redact_text`: the string with each secret replaced by ``[REDACTED:<kind>]``.
- :func:`redact_value`: a JSON value with every string redacted, and every value under a
  secret-named key (:data:`SECRET_KEYS`) replaced whole, whatever its shape. Depth-bounded;
  never raises on content (lone surrogates, deep nesting, huge strings).

A key that names a secret (:mod:`assay.inspect.secret_keys`) counts alike in text
(``DB_PASSWORD=...``) and in a JSON value (``{"password": ...}``). Secrets are looked for in
the text without its default-ignorable code points (a key split by a zero-width space is found,
and masked whole: docs/inspect.md, "Normalization").

Sans-IO and stateless; the standard library, and google-re2 for the prefilter
(:mod:`assay.inspect.prefilter`).
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from assay.inspect.normalize import without_ignorables
from assay.inspect.secret_keys import KEY_KINDS, SECRET_KEYS, key_kind
from assay.inspect.places import SHARED, char_offsets
from assay.inspect.prefilter import encoded
from assay.inspect.secret_rules import IGNORABLE, KINDS, PREFILTER, RULES, TRIGGERS, matches

__all__ = [
    "KINDS",
    "KEY_KINDS",
    "MAX_DEPTH",
    "MAX_FINDINGS",
    "MAX_SECRET_CHARS",
    "SECRET_KEYS",
    "Finding",
    "Secret",
    "find_secrets",
    "key_kind",
    "marker",
    "merge_spans",
    "redact_head",
    "redact_text",
    "redact_value",
    "replace_spans",
]

MAX_DEPTH: Final = 64  # containers nested deeper are replaced whole (kind "depth_limit")
MAX_FINDINGS: Final = 1024  # findings kept per redact_value call (redaction itself is not capped)
_RULES: Final = RULES  # the rule table (tests read it)
MAX_SECRET_CHARS: Final = 32_768  # no rule matches more characters than this (a test checks)
_MIN_SECRET_CHARS: Final = 8  # no rule matches fewer


class Secret(NamedTuple):
    """One secret in a string: its kind and the span ``text[start:end]`` to replace."""

    kind: str
    start: int
    end: int


class Finding(NamedTuple):
    """One redaction in a JSON value: its kind, and where (an RFC 6901 JSON Pointer)."""

    kind: str
    path: str


def marker(kind: str) -> str:
    """What a secret of ``kind`` is replaced with."""
    return f"[REDACTED:{kind}]"


_MARKER: Final = "[REDACTED:"  # what marker() writes: a value that starts with it is not looked at again


def find_secrets(text: str) -> list[Secret]:
    """The secrets in ``text``, sorted by position, never overlapping: where two matches overlap
    (a GitHub token in an Authorization header, after its Bearer scheme) they become one span of
    the kind that starts first (at one start: the longer, then the rule listed first in :data:`KINDS`). A value that
    is a redaction marker (``Authorization: Basic [REDACTED:authorization]``) is not a secret, so
    a redacted text has no finding. A text with default-ignorable characters is searched without
    them, and each span covers the ones inside it.

    Only the rules the prefilter lets through run (one pass,
    :class:`~assay.inspect.prefilter.Prefilter`), each from the places where a match can start
    (one pass for all of them, :mod:`assay.inspect.places`; docs/inspect.md, "Speed")."""
    if len(text) < _MIN_SECRET_CHARS:
        return []
    which = PREFILTER.which(text)
    if which is None:
        return []
    if which[IGNORABLE]:
        clean = without_ignorables(text)
        if clean is not None:
            return [Secret(kind, *clean.span(start, end)) for kind, start, end in _find(clean.text, None)]
    return _find(text, which)


def wanted(text: str) -> list[int]:
    """The triggers (:mod:`assay.inspect.places`) :func:`find_secrets` will ask about for
    ``text`` as it is: for a caller that asks them together with another detector's, in one
    pass."""
    which = PREFILTER.which(text) if len(text) >= _MIN_SECRET_CHARS else None
    if which is None or which[IGNORABLE]:
        return []
    return [number for number, wanted in zip(TRIGGERS, which) if wanted]


def _find(text: str, which: list[bool] | None) -> list[Secret]:
    """find_secrets over a text without default-ignorable characters (``which``: the
    prefilter's answer for it, None to ask)."""
    if which is None:
        which = PREFILTER.which(text)
        if which is None:
            return []
    data = encoded(text)
    places = SHARED.where(text, data, [number for number, wanted in zip(TRIGGERS, which) if wanted])
    index: dict[int, int] | None = None  # byte offset -> character (a text that is not ASCII)
    found: list[tuple[int, int, int, str]] = []
    for order, rule in enumerate(RULES):
        if not which[order]:
            continue
        hits = places[TRIGGERS[order]]
        if not hits:
            continue
        if len(data) != len(text):
            if index is None:
                index = char_offsets(
                    data, (hit for number, wanted in zip(TRIGGERS, which) if wanted for hit in places[number])
                )
            hits = [index[hit] for hit in hits]
        check, group, pick = rule.check, rule.group, rule.pick
        for match in matches(rule, text, hits):
            if pick is not None:
                picked = pick(match)
                if picked is None:
                    continue
                kind, start, end = picked
            else:
                if check is not None and not check(match):
                    continue
                kind = rule.kind
                start, end = match.span(group)
            if end > start and not text.startswith(_MARKER, start):  # a redaction is no secret
                found.append((start, -end, order, kind))
    return merge_spans(found)


def merge_spans(found: list[tuple[int, int, int, str]]) -> list[Secret]:
    """Matches ``(start, -end, order, kind)`` as sorted, non-overlapping secrets: overlapping
    ones become one span of the kind that starts first (at one start: the longer, then the
    lower ``order``)."""
    if not found:
        return []
    found.sort()
    out: list[Secret] = []
    for start, neg_end, _order, kind in found:
        end = -neg_end
        if out and start < out[-1].end:
            last = out[-1]
            if end > last.end:
                out[-1] = Secret(last.kind, last.start, end)
            continue
        out.append(Secret(kind, start, end))
    return out


def redact_text(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, and the kinds replaced, in
    order."""
    return replace_spans(text, find_secrets(text))


def replace_spans(text: str, secrets: list[Secret]) -> tuple[str, list[str]]:
    """``text`` with each of ``secrets`` (sorted, non-overlapping) replaced by its marker, and
    the kinds replaced, in order."""
    if not secrets:
        return text, []
    parts: list[str] = []
    at = 0
    for kind, start, end in secrets:
        parts.append(text[at:start])
        parts.append(marker(kind))
        at = end
    parts.append(text[at:])
    return "".join(parts), [s.kind for s in secrets]


def _pointer(path: str, token: str) -> str:
    return path + "/" + token.replace("~", "~0").replace("/", "~1")


def _text_head(text: str, limit: int) -> tuple[str, list[str], bool]:
    """``text`` redacted and cut to its first ``limit`` characters, and whether it was cut. A
    secret that starts before the cut is replaced whole; the rules see ``MAX_SECRET_CHARS`` past
    the cut, so every secret that starts before it is found whole (no part of one is left)."""
    if len(text) <= limit:
        out, kinds = redact_text(text)
        return out, kinds, False
    window = text[: limit + MAX_SECRET_CHARS]
    parts: list[str] = []
    kinds = []
    at = 0
    for kind, start, end in find_secrets(window):
        if start >= limit:
            break
        parts += (window[at:start], marker(kind))
        kinds.append(kind)
        at = end
    if at < limit:
        parts.append(window[at:limit])
    return "".join(parts), kinds, True


class _Walk:
    __slots__ = ("findings", "budget", "cut")

    def __init__(self, budget: int | None = None) -> None:
        self.findings: list[Finding] = []
        self.budget = budget  # characters of output left (None: no limit)
        self.cut = False

    def note(self, kind: str, path: str) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(Finding(kind, path))

    def spent(self) -> bool:
        """Whether the limit is reached: the walk adds nothing more."""
        if self.budget is not None and self.budget <= 0:
            self.cut = True
            return True
        return False

    def value(self, value: Any, path: str, depth: int) -> Any:
        cls = value.__class__
        budget = self.budget
        if cls is str:
            if budget is None:
                redacted, kinds = redact_text(value)
            else:
                redacted, kinds, cut = _text_head(value, max(budget, 0))
                self.budget = budget - len(redacted) - 2
                self.cut = self.cut or cut
            for kind in kinds:
                self.note(kind, path)
            return redacted
        if budget is not None:  # at least this long in JSON: a scalar 1, a container its brackets
            self.budget = budget - (2 if cls is dict or cls is list or cls is tuple else 1)
        if cls is dict or cls is list or cls is tuple:
            if depth >= MAX_DEPTH:
                self.note("depth_limit", path)
                return marker("depth_limit")
            if cls is dict:
                out: dict[Any, Any] = {}
                for key, item in value.items():
                    if self.spent():
                        break
                    if not isinstance(key, str):
                        key = str(key)
                    if self.budget is not None:
                        if len(key) > self.budget:
                            key, self.cut = key[: self.budget], True
                        self.budget -= len(key) + 3
                    where = _pointer(path, key)
                    named = key_kind(key)
                    if named is not None and item is not None and item != "":
                        self.note(named, where)
                        out[key] = marker(named)
                    else:
                        out[key] = self.value(item, where, depth + 1)
                return out
            items = []
            for i, item in enumerate(value):
                if self.spent():
                    break
                items.append(self.value(item, f"{path}/{i}", depth + 1))
            return items
        return value  # numbers, booleans, null (and anything else) as they are


def redact_value(value: Any) -> tuple[Any, list[Finding]]:
    """A copy of the JSON ``value`` with its secrets redacted, and where they were.

    Every string (at any depth) is redacted with :func:`redact_text`. A value under a key that
    names a secret (:func:`key_kind`: ``password``, ``token``, ``api_key``, ...) is replaced
    whole by ``[REDACTED:<kind>]``, whatever it holds (an object too); ``null`` and ``""`` stay.
    Keys themselves are kept as they are. An object or array nested deeper than
    :data:`MAX_DEPTH` is replaced by ``[REDACTED:depth_limit]``. At most :data:`MAX_FINDINGS`
    findings are returned (all secrets are redacted). The input is not changed."""
    walk = _Walk()
    return walk.value(value, "", 0), walk.findings


def redact_head(value: Any, limit: int) -> tuple[Any, list[Finding], bool]:
    """:func:`redact_value` of about the first ``limit`` characters of ``value`` (in the order
    a JSON encoder writes it), and whether anything was left out: for a large value of which
    only the start is kept (a log line). The work is bounded by ``limit`` (and
    :data:`MAX_SECRET_CHARS` per string), not by the size of ``value``.

    Strings are cut at the characters left (a secret that starts before the cut is replaced
    whole); members and items after the limit are left out. What is kept is counted at its
    shortest JSON length (a string's characters and quotes, a scalar as 1), so whenever something
    was left out the copy's JSON text is at least ``limit`` characters long."""
    walk = _Walk(max(limit, 0))
    out = walk.value(value, "", 0)
    return out, walk.findings, walk.cut
