"""Instructions aimed at the model in what a server sends back (docs/inspect.md, "Injected
instructions" and "Poisoned tool descriptions").

The rules (:mod:`assay.inspect.injection_rules`, the table :data:`RULES`, also in
docs/inspect.md) are character rules (invisible and terminal characters, over the ``str``) and
phrase rules (over the text encoded as UTF-8 with ASCII letters lowercased), each phrase rule with
anchors: words every match contains. A phrase rule runs only near its anchors, so ordinary text
costs one pass of the detectors' RE2 set (which says which anchors it holds, and whether
normalizing can change anything), and a text with anchors one more pass that says where they are
(:mod:`assay.inspect.places`, shared with the secret rules).

Phrases are looked for in the text with the invisible and terminal hits taken out and normalized
(:mod:`assay.inspect.normalize`: invisible characters removed, NFKC, look-alike letters), so
neither characters slipped into or between the words nor letters of other alphabets hide one; a
hit's span is the original text's. Every rule's work is linear in the length of the text.

Sans-IO and stateless; google-re2 through the prefilter and the places (the standard library
without it). Never raises on content.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Final, NamedTuple

from assay.inspect.injection_rules import CHAR_ANY as _CHAR_ANY
from assay.inspect.injection_rules import CHAR_KIND as _CHAR_KIND
from assay.inspect.injection_rules import CHARS as _CHARS
from assay.inspect.injection_rules import GATE_CHARS as _GATE_CHARS
from assay.inspect.injection_rules import INJECTION as _INJECTION
from assay.inspect.injection_rules import LOWER as _LOWER
from assay.inspect.injection_rules import ORDER as _ORDER
from assay.inspect.injection_rules import POISON as _POISON
from assay.inspect.injection_rules import RULES
from assay.inspect.injection_rules import Phrase as _Phrase
from assay.inspect.normalize import anchor_regex, changed_class, changed_runs, multi_class, single_class, strip_in_words
from assay.inspect.places import SHARED, Runs, Trigger, char_offsets, shared_numbers
from assay.inspect.prefilter import Prefilter, encoded, literal, own_utf8
from assay.inspect.spliced import splice

__all__ = ["GATE", "MARKER", "RULES", "Hit", "find_injection", "find_poison", "strip_injection"]

MARKER: Final = "[REMOVED:injection]"  # what strip_injection puts in place of a phrase


class Hit(NamedTuple):
    """One finding: its kind, its rule id, and the span ``text[start:end]``."""

    kind: str
    rule: str
    start: int
    end: int


def _plan(rules: tuple[_Phrase, ...]) -> dict[bytes, tuple[bytes, ...]]:
    """gate -> the anchors to look for when the gate is in the text (each anchor once)."""
    plan: dict[bytes, list[bytes]] = {gate: [] for gate in _GATES}
    for rule in rules:
        plan[rule.gate] += [anchor for anchor in rule.anchors if anchor not in plan[rule.gate]]
    return {gate: tuple(anchors) for gate, anchors in plan.items()}


_GATES: Final = (b"", b":", b"#", b"<", b"[")
_ALL: Final = _INJECTION + _POISON
_PLANS: Final = {id(_INJECTION): _plan(_INJECTION), id(_ALL): _plan(_ALL)}
# each anchor as a trigger in the shared table (assay.inspect.places), in any case; and the runs
# of characters normalization changes
_CHANGED: Final = SHARED.add(Runs("normalized", changed_class, changed_runs))
_ANCHOR_NUMBERS: Final = {
    anchor: number
    for anchor, number in zip(
        sorted({a for rule in _ALL for a in rule.anchors}),
        shared_numbers(Trigger([a.decode("ascii")]) for a in sorted({a for rule in _ALL for a in rule.anchors})),
    )
}


_INVISIBLE_KINDS: Final = frozenset(("invisible", "terminal"))


# ---------------------------------------------------------------- the scan


def _char_hits(text: str) -> list[Hit]:
    """The invisible and terminal hits (a BOM at the very start of the text is not one)."""
    first = _CHAR_ANY.search(text, 1 if text.startswith("\ufeff") else 0)
    if first is None:
        return []
    start = first.start()
    out: list[Hit] = []
    kind = rule = ""
    lo = hi = -1
    for match in _CHARS.finditer(text, start):
        at, end = match.span()
        name = match.lastgroup or ""
        if at == hi and _CHAR_KIND[name] == kind:  # touching a hit of the same kind: one hit
            hi = end
            continue
        if hi >= 0:
            out.append(Hit(kind, rule, lo, hi))
        rule, kind, lo, hi = name, _CHAR_KIND[name], at, end
    if hi >= 0:
        out.append(Hit(kind, rule, lo, hi))
    return out


def _windows(size: int, rule: _Phrase, where: dict[bytes, list[int]]) -> list[tuple[int, int]]:
    """The stretches of the folded text (``size`` bytes) around the rule's anchors (``where``:
    each anchor's positions) where a match can be, merged."""
    before, after = rule.before, rule.after
    spans: list[tuple[int, int]] = []
    sort = False
    for anchor in rule.anchors:
        positions = where.get(anchor)
        if positions:
            n = len(anchor) + after
            sort = bool(spans)  # one anchor's positions are in increasing order: so are its spans
            spans += [(at - before, at + n) for at in positions]
    if not spans:
        return spans
    if sort:
        spans.sort()
    merged = [spans[0]]
    last_hi = spans[0][1]
    for lo, hi in spans:
        if lo <= last_hi:
            if hi > last_hi:
                last_hi = hi
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
            last_hi = hi
    # within the text: only the first can start before it, only the last end after it (a span
    # starts before its anchor, which is in the text; clamped after merging, the same stretches)
    if merged[0][0] < 0:
        merged[0] = (0, merged[0][1])
    if merged[-1][1] > size:
        merged[-1] = (merged[-1][0], size)
    return merged


def _wanted(data: bytes, rules: tuple[_Phrase, ...], absent: frozenset[bytes]) -> tuple[list[bytes], set[bytes]]:
    """The gates open in ``data`` (a text's UTF-8: a gate is ASCII, not a letter), and the
    anchors of ``rules`` looked for behind them, less ``absent``."""
    plan = _PLANS[id(rules)]
    open_gates = [gate for gate in _GATES if data.find(gate) >= 0]
    return open_gates, {anchor for gate in open_gates for anchor in plan[gate]}.difference(absent)


def _phrase_hits(text: str, rules: tuple[_Phrase, ...], absent: frozenset[bytes] = frozenset()) -> list[Hit]:
    """The phrase hits in ``text`` (``absent``: anchors the gate found nowhere in it, not
    looked for)."""
    data = encoded(text)
    open_gates, wanted = _wanted(data, rules, absent)
    if not wanted:
        return []
    # where each anchor is: one pass for them all, over the text's UTF-8 (shared with the
    # secret rules when they asked about this text)
    found = SHARED.where(text, data, [_ANCHOR_NUMBERS[anchor] for anchor in wanted])
    ascii_ = len(data) == len(text)
    utf8 = data if ascii_ else own_utf8(text)
    spans = _search(utf8, rules, {anchor: found[_ANCHOR_NUMBERS[anchor]] for anchor in wanted}, open_gates)
    if not spans or ascii_:
        return [Hit(kind, rule, start, end) for start, end, kind, rule in spans]
    index = char_offsets(utf8, [s for span in spans for s in span[:2]])
    return [Hit(kind, rule, index[start], index[end]) for start, end, kind, rule in spans]


_BEHIND: Final = 8  # bytes before a stretch a rule may look at (\b, ^, a look-behind: a test checks)


def _search(
    data: bytes, rules: tuple[_Phrase, ...], where: dict[bytes, list[int]], open_gates: list[bytes]
) -> list[tuple[int, int, str, str]]:
    """``(start, end, kind, rule)`` of every phrase match in ``data`` (a reading's UTF-8;
    offsets in it), each rule searched in the stretches around its anchors (``where``: each
    anchor's offsets), in those stretches of ``data`` folded (ASCII letters lowercased)."""
    present = {anchor for anchor, positions in where.items() if positions}
    if not present:
        return []
    size = len(data)
    stretches = [
        (rule, _windows(size, rule, where))
        for rule in rules
        if rule.gate in open_gates and not present.isdisjoint(rule.anchors)
    ]
    # the folded bytes of every stretch and what a rule looks at before it, each byte once
    regions: list[tuple[int, int]] = []
    for lo, hi in sorted(span for _rule, spans in stretches for span in spans):
        lo = max(0, lo - _BEHIND)
        if regions and lo <= regions[-1][1]:
            if hi > regions[-1][1]:
                regions[-1] = (regions[-1][0], hi)
        else:
            regions.append((lo, hi))
    starts = [lo for lo, _hi in regions]
    folded = [data[lo:hi].translate(_LOWER) for lo, hi in regions]
    spans: list[tuple[int, int, str, str]] = []
    for rule, windows in stretches:
        finditer, kind, name = rule.pattern.finditer, rule.kind, rule.rule
        for lo, hi in windows:
            k = bisect_right(starts, lo) - 1
            base = starts[k]
            for match in finditer(folded[k], lo - base, hi - base):
                if match.end() > match.start():
                    spans.append((match.start() + base, match.end() + base, kind, name))
    return spans


def _normalized_hits(
    text: str, rules: tuple[_Phrase, ...], drop: list[tuple[int, int]], changed: bool, absent: frozenset[bytes]
) -> list[Hit]:
    """The phrase hits in the text with the spans ``drop`` taken out and (``changed``)
    normalized, mapped back (docs/inspect.md, "Normalization"); ``absent``: anchors the gate
    found nowhere in the text as it is. The reading is built from the text's UTF-8
    (:mod:`assay.inspect.spliced`), and its anchors from where they are in the text, found in
    one pass with the characters normalization changes."""
    data = encoded(text)
    numbers = [_ANCHOR_NUMBERS[anchor] for anchor in _ANCHORS_OF[id(rules)] if anchor not in absent]
    found = SHARED.where(text, data, numbers + [_CHANGED] if changed else numbers)
    in_text = {anchor: found[_ANCHOR_NUMBERS[anchor]] for anchor in _ANCHORS_OF[id(rules)] if anchor not in absent}
    edges = found[_CHANGED] if changed else []
    runs = list(zip(edges[::2], edges[1::2]))
    utf8 = own_utf8(text)
    out: list[Hit] = []
    # a zero-width space is read both as nothing (inside a word) and as a space (between two)
    for zwsp_as_space in (False, True) if changed and "\u200b" in text else (False,):
        reading = splice(text, utf8, drop, runs, zwsp_as_space)
        open_gates, wanted = _wanted(reading.data, rules, frozenset())
        if not wanted:
            continue
        spans = _search(reading.data, rules, reading.anchors(in_text, wanted), open_gates)
        if spans:
            mapped = reading.spans([(start, end) for start, end, _kind, _rule in spans])
            out.extend(Hit(kind, rule, start, end) for (start, end), (_s, _e, kind, rule) in zip(mapped, spans))
    return out


def _merge(hits: list[Hit]) -> list[Hit]:
    """Sorted by start, overlapping hits made one (of the hit that starts first; at one start
    the longer, then the rule listed first in :data:`RULES`)."""
    hits.sort(key=lambda h: (h.start, -h.end, _ORDER[h.rule]))
    out: list[Hit] = []
    for hit in hits:
        if out and hit.start < out[-1].end:
            last = out[-1]
            if hit.end > last.end:
                out[-1] = last._replace(end=hit.end)
            continue
        out.append(hit)
    return out


def _cut(text: str, hits: list[Hit]) -> str:
    """``text`` without the spans of ``hits`` (sorted, apart)."""
    parts = []
    at = 0
    for hit in hits:
        if hit.start > at:
            parts.append(text[at : hit.start])
        at = max(at, hit.end)
    parts.append(text[at:])
    return "".join(parts)


def _anchors(rules: tuple[_Phrase, ...]) -> tuple[bytes, ...]:
    return tuple(sorted({a for r in rules for a in r.anchors}))


def _gate(rules: tuple[_Phrase, ...]) -> Prefilter:
    """One pass that says whether a text can hold a hit at all, and then what it holds: each
    anchor of ``rules`` (in any case), a character some character rule names, an anchor in any
    of its spellings (docs/inspect.md, "Normalization"), a character normalization removes or
    replaces by one, one it replaces by several."""
    anchors = [a.decode("ascii") for a in _anchors(rules)]
    return Prefilter(
        lambda: [
            *([literal(a, fold=True)] for a in anchors),
            [_GATE_CHARS],
            [anchor_regex(a) for a in anchors],
            [single_class()],
            [multi_class()],
        ]
    )


def _scan(text: str, rules: tuple[_Phrase, ...]) -> list[Hit]:
    if not isinstance(text, str) or not text:
        return []
    which = _GATES_OF[id(rules)].which(text)
    if which is None:  # the usual text: one pass, no hit possible
        return []
    names = _ANCHORS_OF[id(rules)]
    marks, spelled, singles, multis = which[len(names) :]
    anchors = any(which[: len(names)])
    chars = _char_hits(text) if marks else []
    # normalizing can change what is found: a character it changes can make (or be inside) an
    # anchor, or stand inside a phrase around one; or what the character hits take out joins one
    changed = multis or (singles and (spelled or bool(chars)))
    if not chars and not changed:
        if not anchors:  # no anchor, and nothing to take out or replace that could hide one
            return []
        absent = frozenset(name for name, found in zip(names, which) if not found)
        hits = _phrase_hits(text, rules, absent)
        return _merge(hits) if hits else hits
    # phrases in the text with the invisible and terminal hits taken out, normalized, mapped back
    chars = _merge(chars)
    drop = [(hit.start, hit.end) for hit in chars]
    absent = frozenset(name for name, found in zip(names, which) if not found)
    return _merge(chars + _normalized_hits(text, rules, drop, changed, absent))


GATE: Final = _gate(_INJECTION)  # find_injection's first look (assay.inspect.scan asks it too)
_GATES_OF: Final = {id(_INJECTION): GATE, id(_ALL): _gate(_ALL)}
_ANCHORS_OF: Final = {id(_INJECTION): _anchors(_INJECTION), id(_ALL): _anchors(_ALL)}


def wanted(text: str, poison: bool = False) -> list[int]:
    """The triggers (:mod:`assay.inspect.places`) :func:`find_injection` (with ``poison``,
    :func:`find_poison`) will ask about where ``text`` is read as it is: for a caller that
    asks them together with another detector's, in one pass. Empty when the text is read
    normalized (or holds nothing)."""
    rules = _ALL if poison else _INJECTION
    which = _GATES_OF[id(rules)].which(text) if isinstance(text, str) and text else None
    if which is None:
        return []
    names = _ANCHORS_OF[id(rules)]
    marks, spelled, singles, multis = which[len(names) :]
    absent = frozenset(name for name, found in zip(names, which) if not found)
    if marks or multis or (singles and spelled):  # maybe read normalized: every anchor the text holds
        present = [_ANCHOR_NUMBERS[anchor] for anchor in names if anchor not in absent]
        return present + [_CHANGED] if multis or singles else present
    _gates, anchors = _wanted(encoded(text), rules, absent)
    return [_ANCHOR_NUMBERS[anchor] for anchor in anchors]


def find_injection(text: str) -> list[Hit]:
    """Instructions aimed at the model in a tool result or a resource's text: invisible
    characters, terminal escapes and the injection phrases (docs/inspect.md, "Injected
    instructions"). Sorted by start, never overlapping."""
    return _scan(text, _INJECTION)


def find_poison(text: str) -> list[Hit]:
    """:func:`find_injection`'s hits and, for a tool's description, title or an argument's
    description, the rules that ask to read files, send data or keep a secret from the user
    (docs/inspect.md, "Poisoned tool descriptions")."""
    return _scan(text, _ALL)


_MAX_PASSES: Final = 8
_INVISIBLE_SINGLES: Final = re.compile("[\u200b\u200c\u200d\u2060\ufeff\ufe00-\ufe0f\U000e0100-\U000e01ef]+")


def strip_injection(text: str) -> tuple[str, list[Hit]]:
    """``text`` with its invisible and terminal hits removed and each phrase hit replaced by
    ``[REMOVED:injection]``, and :func:`find_injection`'s hits. A text with no hit is returned
    as it is. In a text with a hit, the default-ignorable characters inside words (a zero-width
    space, a word joiner, a soft hyphen between two letters) go too. No invisible or terminal
    hit is left: where a removal brings two zero-width characters together, that run is removed
    too (after a few passes, every zero-width character and variation selector is)."""
    hits = find_injection(text)
    if not hits:
        return text, hits
    parts = []
    at = 0
    for hit in hits:
        parts.append(text[at : hit.start])
        if hit.kind not in _INVISIBLE_KINDS:
            parts.append(MARKER)
        at = hit.end
    parts.append(text[at:])
    out = strip_in_words("".join(parts))
    for _ in range(_MAX_PASSES):
        left = _char_hits(out)
        if not left:
            return out, hits
        out = _cut(out, left)
    head = "\ufeff" if out.startswith("\ufeff") else ""
    return head + _INVISIBLE_SINGLES.sub("", out[len(head) :]), hits
