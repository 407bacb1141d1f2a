"""Instructions aimed at the model in what a server sends back (docs/inspect.md, "Injected
instructions" and "Poisoned tool descriptions").

A rule set written for this project, each rule a ``(kind, rule id)`` (the table :data:`RULES`,
also in docs/inspect.md):

- character rules (kinds ``invisible`` and ``terminal``): a Python ``str`` expression over the
  text: Unicode tag characters, runs of zero-width characters or variation selectors, bidi
  controls, terminal escape sequences and control characters;
- phrase rules (kinds ``phrase``, and for tool descriptions ``file_read``, ``exfiltration``,
  ``secrecy``): a ``bytes`` expression over the text encoded as UTF-8 with ASCII letters
  lowercased (case-insensitive, whitespace-flexible). Each has anchors, words every match
  contains: a rule runs only near its anchors, so ordinary text costs one pass of
  ``bytes.translate`` and a few substring searches.

Every expression has bounded repetitions only (possessive where more pattern follows), so the
work is linear in the length of the text (tests/inspect/test_injection.py feeds each rule a
megabyte of adversarial input under a time limit). Phrases are looked for in the text with the
invisible and terminal hits taken out and normalized (:mod:`assay.inspect.normalize`: invisible
characters removed, NFKC, look-alike letters), so neither characters slipped into or between the
words nor letters of other alphabets hide one; a hit's span is the original text's.

Sans-IO and stateless; the standard library only. Never raises on content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Final, NamedTuple

from assay.inspect.normalize import anchor_regex, for_phrases, multi_class, single_class, strip_in_words
from assay.inspect.prefilter import Prefilter, literal

__all__ = ["GATE", "MARKER", "RULES", "Hit", "find_injection", "find_poison", "strip_injection"]

MARKER: Final = "[REMOVED:injection]"  # what strip_injection puts in place of a phrase


class Hit(NamedTuple):
    """One finding: its kind, its rule id, and the span ``text[start:end]``."""

    kind: str
    rule: str
    start: int
    end: int


# ---------------------------------------------------------------- character rules (str)

_CHAR_RULES: Final[tuple[tuple[str, str, str, str], ...]] = (
    ("invisible", "tag_characters", "[\U000e0000-\U000e007f]{1,4096}+",
     "Unicode tag characters U+E0000 to U+E007F (invisible ASCII), any"),
    ("invisible", "zero_width_run", "[\u200b\u200c\u200d\u2060\ufeff]{2,4096}+",
     "two or more zero-width characters in a row (U+200B, U+200C, U+200D, U+2060, U+FEFF)"),
    ("invisible", "variation_selector_run", "[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,4096}+",
     "two or more variation selectors in a row (one follows a character; more hide bytes)"),
    ("invisible", "bidi_override", "[\u202a-\u202e\u2066-\u2069]{1,4096}+",
     "bidi embedding, override and isolate controls U+202A to U+202E, U+2066 to U+2069"),
    ("terminal", "ansi_escape",
     "\x1b(?:\\[[\x30-\x3f]{0,64}+[\x20-\x2f]{0,16}+[\x40-\x7e]?"
     "|[\\]PX^_][^\x07\x1b\x9c]{0,4096}+(?:\x07|\x1b\\\\|\x9c)?"
     "|[\x20-\x2f]{0,16}+[\x30-\x7e]?)",
     "ESC (U+001B) and the sequence it starts: CSI, OSC and other strings, other ESC x"),
    ("terminal", "c1_csi", "\x9b[\x30-\x3f]{0,64}+[\x20-\x2f]{0,16}+[\x40-\x7e]?",
     "the C1 control sequence introducer U+009B and its sequence"),
    ("terminal", "c1_control", "[\x80-\x9a\x9c-\x9f]{1,4096}+", "other C1 controls U+0080 to U+009F"),
    ("terminal", "control_character", "[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]{1,4096}+",
     "C0 controls and DEL, except tab, line feed, carriage return and form feed"),
)
_CHARS: Final = re.compile("|".join(f"(?P<{rule}>{pattern})" for _k, rule, pattern, _d in _CHAR_RULES))
# one character class of every character rule's first character: a quick look first
_CHAR_ANY: Final = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f"
                              "\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f\U000e0100-\U000e01ef]")
_CHAR_KIND: Final = {rule: kind for kind, rule, _p, _d in _CHAR_RULES}

# ASCII letters lowercased; the controls of the character rules (and ESC) become NUL, so that
# ``b"\0" in`` tells whether an ASCII text needs the character rules at all
_FOLD = bytearray(range(256))
for _c in range(0x41, 0x5B):
    _FOLD[_c] = _c + 0x20
for _c in (*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F):
    _FOLD[_c] = 0
_LOWER: Final = bytes(_FOLD)

# ---------------------------------------------------------------- phrase rules (bytes)

_WS = rb"(?:[ \t\n\r\x0c]|\xc2\xa0|\xe2\x80[\x80-\x8b\xa8\xa9\xaf]|\xe2\x81[\x9f\xa0]|\xe3\x80\x80)"
S = _WS + rb"{1,8}+"  # whitespace between words: 1 to 8 spaces, tabs, line breaks, NBSP, ...
W = rb"[a-z0-9'\-]{1,24}+"  # one word
_INSTR = rb"instructions?\b"
_NOT = rb"(?:do" + S + rb"not|don't|don\xe2\x80\x99t|dont|never)"
_ARG = rb"(?:parameter|argument|field|param|arg)s?\b"
_MARGIN: Final = 512  # more than any phrase match's bytes on either side of its anchor (a test checks)


@dataclass(frozen=True)
class _Phrase:
    kind: str
    rule: str
    source: bytes
    anchors: tuple[bytes, ...]  # every match contains one of these
    gate: bytes = b""  # and this byte (a cheap look first)
    before: int = _MARGIN  # a match starts at most this many bytes before its anchor
    after: int = _MARGIN  # and ends (look-ahead included) at most this many after it

    @cached_property
    def pattern(self) -> re.Pattern[bytes]:
        """The compiled rule (on first use: most texts never need most rules)."""
        return re.compile(self.source, re.MULTILINE)


def _p(kind: str, rule: str, pattern: bytes, anchors: tuple[bytes, ...], gate: bytes = b"",
       before: int = _MARGIN, after: int = _MARGIN) -> _Phrase:
    return _Phrase(kind, rule, pattern, anchors, gate, before, after)


_INJECTION: Final[tuple[_Phrase, ...]] = (
    _p("phrase", "ignore_previous",
       rb"\b(?:ignore|disregard|skip|bypass|override)" + S + rb"(?:all" + S + rb")?(?:(?:of" + S + rb")?"
       rb"(?:the|your|any|my|these|those)" + S + rb")?(?:previous|prior|above|earlier|preceding|foregoing|"
       rb"former|original|initial|old|system)" + S + rb"(?:(?:system|developer|user)" + S + rb")?" + _INSTR,
       (b"instruct",), before=200, after=40),
    _p("phrase", "disregard_instructions", rb"\bdisregard" + S + rb"(?:" + W + S + rb"){0,6}?" + _INSTR,
       (b"instruct",), before=340, after=40),
    _p("phrase", "forget_instructions",
       rb"\bforget" + S + rb"(?:(?:all|about|everything|any)" + S + rb")?(?:(?:of|about)" + S + rb")?"
       rb"(?:(?:your|the|previous|prior|above|earlier|my|these|those|original)" + S + rb"){1,2}" + _INSTR,
       (b"instruct",), before=160, after=40),
    _p("phrase", "new_instructions",
       rb"\b(?:new|updated|revised|real|actual|true|additional|secret)" + S
       + rb"(?:(?:system|important)" + S + rb")?instructions?[ \t]{0,4}+:", (b"instruct",), b":", 80, 40),
    _p("phrase", "you_are_now",
       rb"\byou(?:" + S + rb"are|'re|\xe2\x80\x99re)" + S + rb"now" + S + rb"(?:"
       rb"(?:a|an|the|my|your)" + S + rb"(?:" + W + S + rb"){0,3}?(?:ai|assistant|chatbot|persona|llm|"
       rb"language" + S + rb"model|ai" + S + rb"model)\b"
       rb"|(?:in" + S + rb")?(?:developer|god|jailbreak|jailbroken|dan|unrestricted|unfiltered|uncensored|evil)\b"
       rb"|(?:acting|playing|roleplaying|role-playing|pretending)" + S + rb"(?:as|to)\b"
       rb"|no" + S + rb"longer" + S + rb"(?:bound|restricted|limited|an?" + S + rb"ai)\b)", (b"now",), b"", 80, 240),
    _p("phrase", "role_marker",
       rb"^[ \t]{0,8}+(?:>[ \t]{0,4}+)?(?:\*\*|__)?(?:system|assistant)(?:\*\*|__)?[ \t]{0,4}+:(?:\*\*|__)?"
       rb"(?=[ \t]{1,8}+(?:[a-z][a-z',.!?\-]{0,30}+[ \t]{1,4}+){2}[a-z])", (b"system", b"assistant"), b":", 40, 120),
    _p("phrase", "role_marker",
       rb"^#{1,6}+[ \t]{1,4}+(?:system|assistant)(?:[ \t]{1,4}+(?:prompt|message|instructions?))?[ \t]{0,4}+:"
       rb"|^#{1,6}+[ \t]{1,4}+(?:system|assistant)[ \t]{1,4}+(?:prompt|message)[ \t]{0,4}+$", (b"system", b"assistant"), b"#", 40, 60),
    _p("phrase", "chat_token",
       rb"<\|(?:im_start|im_end|im_sep|endoftext|system|user|assistant|begin_of_text|start_header_id|"
       rb"end_header_id|eot_id)\|>|<</?sys>>", (b"|>", b"sys>>"), b"<", 24, 24),
    _p("phrase", "chat_token", rb"\[/?inst\]", (b"inst]",), b"[", 8, 8),
    _p("phrase", "important_tag",
       rb"</?(?:important|instructions?)(?:[ \t\r\n/][^<>]{0,200}+)?>"
       rb"|<(?:system(?:[-_](?:prompt|message|reminder|instructions?))?|secret)(?:[ \t\r\n][^<>]{0,200}+)?>"
       rb"(?![ \t]{0,4}+[a-z0-9_.\-]{1,40}+[ \t]{0,4}+</)", (b"important", b"instruct", b"system", b"secret"), b"<", 8, 320),
    _p("phrase", "do_not_tell_user",
       _NOT + S + rb"(?:tell|inform|(?:mention|reveal|disclose)(?:" + S + W + rb"){0,3}?" + S + rb"to)" + S
       + rb"(?:the" + S + rb")?user\b(?!'|\xe2\x80\x99)", (b"user",), b"", 300, 16),
)

_PATHS = (rb"(?:~/\.ssh\b|\.ssh/|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|(?<![a-z0-9_.\-])\.env\b|\.aws/(?:credentials|config)\b"
          rb"|\.netrc\b|/etc/(?:passwd|shadow)\b|\.npmrc\b|\.pypirc\b|\.git-credentials\b|\.docker/config\.json"
          rb"|\.kube/config\b|\b(?:your|the|the" + S + rb"user's|their|my)" + S + rb"(?:ssh" + S + rb")?private" + S + rb"keys?\b)")
_OBJECT = (rb"(?:it|them|its" + S + rb"contents?|the" + S + rb"(?:contents?|key|keys|file" + S + rb"contents|credentials?"
           rb"|tokens?|secrets?|passwords?|conversation(?:" + S + rb"history)?|chat" + S + rb"history|system" + S + rb"prompt)"
           rb"(?:" + S + rb"of" + S + rb"[^\n<>]{1,60}?)?)")

_POISON: Final[tuple[_Phrase, ...]] = (
    _p("file_read", "read_sensitive_file",
       rb"\b(?:read|open|cat|include|load|print|dump|output|attach|access|fetch|get|grab|copy|upload|send|"
       rb"provide|return|base64)\b[^\n]{0,80}?" + _PATHS,
       (b"ssh", b"id_", b".env", b".aws", b".netrc", b"passwd", b"shadow", b".npmrc", b".pypirc", b"credentials",
        b".docker", b".kube", b"private")),
    _p("exfiltration", "pass_it_as",
       rb"\bpass" + S + _OBJECT + S + rb"(?:as|in|into|via|through)" + S + rb"(?:(?:the|a|an|your)" + S
       + rb")?(?:[`'\"]?[a-z0-9_\-]{1,64}+[`'\"]?" + S + rb")?" + _ARG, (b"pass",)),
    _p("exfiltration", "send_to",
       rb"\bsend" + S + rb"(?:" + _OBJECT + rb"|everything|all" + S + rb"of" + S + rb"(?:it|this|them))" + S
       + rb"(?:back" + S + rb")?to\b", (b"send",)),
    _p("exfiltration", "include_in_argument",
       rb"\binclude" + S + _OBJECT + S + rb"(?:verbatim" + S + rb")?(?:in|into|as|inside|within)" + S
       + rb"(?:(?:the|a|an|your)" + S + rb")?(?:[`'\"]?[a-z0-9_\-]{1,64}+[`'\"]?" + S + rb")?" + _ARG,
       (b"include",)),
    _p("exfiltration", "content_as_argument",
       rb"\b(?:it|them|contents?)" + S + rb"as" + S + rb"(?:the|a|an)" + S
       + rb"[`'\"]?[a-z0-9_\-]{1,64}+[`'\"]?" + S + _ARG, (b"param", b"arg", b"field")),
    _p("secrecy", "dont_mention",
       _NOT + S + rb"(?:mention|reveal|disclose|tell|explain|acknowledge|share)" + S
       + rb"(?:this|that|these|any" + S + rb"of" + S + rb"(?:this|these|it)|the" + S
       + rb"(?:above|following|instructions?|note|notes|request|step|steps|fact|reason))\b",
       (b"mention", b"reveal", b"disclose", b"tell", b"explain", b"acknowledge", b"share")),
    _p("secrecy", "without_telling",
       rb"\bwithout" + S + rb"(?:telling|informing)" + S + rb"(?:the" + S + rb")?user\b", (b"without",)),
    _p("secrecy", "user_must_not_know",
       rb"\buser" + S + rb"(?:must|should|shall|may|can|needs?" + S + rb"to)" + S + rb"(?:not|never)" + S
       + rb"(?:know|notice|find" + S + rb"out|learn|be" + S + rb"(?:told|informed|aware))\b"
       rb"|\b(?:keep|hide)" + S + rb"(?:this|it|these" + S + rb"instructions)" + S + rb"(?:secret" + S + rb")?from"
       + S + rb"(?:the" + S + rb")?user\b", (b"user",)),
)

_DOCS: Final[dict[str, str]] = {
    "ignore_previous": "ignore (all) (the) previous / prior / above ... instructions",
    "disregard_instructions": "disregard, up to six words, instructions",
    "forget_instructions": "forget (all) your / previous / the ... instructions",
    "new_instructions": "new / updated / real ... instructions followed by a colon",
    "you_are_now": "you are now + a new identity (an AI, an assistant, a persona), a mode (developer, DAN, "
                   "unrestricted), acting as, no longer bound",
    "role_marker": "a chat role at a line start: system or assistant and a colon and a sentence, or a "
                   "Markdown heading of the role and a colon (or prompt / message)",
    "chat_token": "a chat template token anywhere: im_start, im_end, endoftext, eot_id ... between <| and "
                  "|>; INST or /INST in square brackets; SYS or /SYS in double angle brackets",
    "important_tag": "an XML-ish tag important, instructions (open or close), system or secret (open; not "
                     "around one short word)",
    "do_not_tell_user": "do not / don't / never tell, inform, mention ... to the user",
    "read_sensitive_file": "a sensitive path (~/.ssh, id_rsa, .env, .aws/credentials, .netrc, /etc/passwd, "
                           ".npmrc, .pypirc, your private key, ...) after a verb on the same line: read / open / "
                           "cat / include / load ...",
    "pass_it_as": "pass it / its contents / the key ... as / in the ... parameter (argument, field)",
    "send_to": "send it / the contents / the key / the conversation ... to",
    "include_in_argument": "include it / the contents ... in the ... parameter (argument, field)",
    "content_as_argument": "it / contents + as the + a name + parameter / argument / field",
    "dont_mention": "do not / don't / never mention, reveal, tell ... this / these / the instructions",
    "without_telling": "without telling / informing the user",
    "user_must_not_know": "user + must / should + not / never + know / find out / be told; keep / hide + "
                          "this + (secret) + from + the user",
}


def _plan(rules: tuple[_Phrase, ...]) -> dict[bytes, tuple[bytes, ...]]:
    """gate -> the anchors to look for when the gate is in the text (each anchor once)."""
    plan: dict[bytes, list[bytes]] = {gate: [] for gate in _GATES}
    for rule in rules:
        plan[rule.gate] += [anchor for anchor in rule.anchors if anchor not in plan[rule.gate]]
    return {gate: tuple(anchors) for gate, anchors in plan.items()}


_GATES: Final = (b"", b":", b"#", b"<", b"[")
_ALL: Final = _INJECTION + _POISON
_PLANS: Final = {id(_INJECTION): _plan(_INJECTION), id(_ALL): _plan(_ALL)}


def _rule_table() -> tuple[tuple[str, str, str], ...]:
    out = [(kind, rule, doc) for kind, rule, _p, doc in _CHAR_RULES]
    seen = set()
    for phrase in _INJECTION + _POISON:
        if phrase.rule not in seen:
            seen.add(phrase.rule)
            out.append((phrase.kind, phrase.rule, _DOCS[phrase.rule]))
    return tuple(out)


RULES: Final = _rule_table()
"""(kind, rule id, what it matches) of every rule; docs/inspect.md has the same table."""
_ORDER: Final = {rule: i for i, (_k, rule, _d) in enumerate(RULES)}
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
    for anchor in rule.anchors:
        positions = where.get(anchor)
        if positions:
            n = len(anchor)
            spans.extend((max(0, at - before), min(size, at + n + after)) for at in positions)
    if len(spans) < 2:
        return spans
    spans.sort()
    merged = [spans[0]]
    for lo, hi in spans[1:]:
        if lo <= merged[-1][1]:
            if hi > merged[-1][1]:
                merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def _positions(folded: bytes, anchor: bytes) -> list[int]:
    """Every position of ``anchor`` in ``folded`` (one pass)."""
    out = []
    find, n = folded.find, len(anchor)
    at = find(anchor)
    while at >= 0:
        out.append(at)
        at = find(anchor, at + n)
    return out


def _char_offsets(data: bytes, offsets: list[int]) -> dict[int, int]:
    """UTF-8 byte offsets (at character boundaries) -> str indices, in one pass."""
    out = {}
    at = chars = 0
    for offset in sorted(set(offsets)):
        chars += len(data[at:offset].decode("utf-8", "surrogatepass"))
        at = offset
        out[offset] = chars
    return out


def _phrase_hits(text: str, rules: tuple[_Phrase, ...], folded: bytes | None = None,
                 absent: frozenset[bytes] = frozenset()) -> list[Hit]:
    """The phrase hits in ``text`` (``folded``: its UTF-8 with ASCII letters lowercased, when the
    caller has it; ``absent``: anchors the gate found nowhere in it, not looked for again)."""
    utf8 = b""
    if folded is None:
        if text.isascii():
            folded = text.encode("ascii").translate(_LOWER)
        else:
            utf8 = text.encode("utf-8", "surrogatepass")
            folded = utf8.translate(_LOWER)
    elif len(folded) != len(text):
        utf8 = text.encode("utf-8", "surrogatepass")
    plan = _PLANS[id(rules)]
    open_gates = [gate for gate in _GATES if gate in folded]
    where: dict[bytes, list[int]] = {}
    for gate in open_gates:
        for anchor in plan[gate]:
            if anchor not in where:
                where[anchor] = [] if anchor in absent else _positions(folded, anchor)
    present = {anchor for anchor, positions in where.items() if positions}
    if not present:
        return []
    spans: list[tuple[int, int, str, str]] = []
    size = len(folded)
    for rule in rules:
        if rule.gate not in open_gates or present.isdisjoint(rule.anchors):
            continue
        for lo, hi in _windows(size, rule, where):
            for match in rule.pattern.finditer(folded, lo, hi):
                if match.end() > match.start():
                    spans.append((match.start(), match.end(), rule.kind, rule.rule))
    if not spans or not utf8:
        return [Hit(kind, rule, start, end) for start, end, kind, rule in spans]
    index = _char_offsets(utf8, [s for span in spans for s in span[:2]])
    return [Hit(kind, rule, index[start], index[end]) for start, end, kind, rule in spans]


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
            parts.append(text[at:hit.start])
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
    return Prefilter(lambda: [*([literal(a, fold=True)] for a in anchors), [_GATE_CHARS],
                              [anchor_regex(a) for a in anchors], [single_class()], [multi_class()]])


# every character a character rule can start with (a superset: a single ZWJ in an emoji passes,
# the full scan then finds no hit)
_GATE_CHARS: Final = (  # the characters themselves: the dialect has no escape beyond U+FFFF
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f\u202a-\u202e\u2066-\u2069"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


def _scan(text: str, rules: tuple[_Phrase, ...]) -> list[Hit]:
    if not isinstance(text, str) or not text:
        return []
    which = _GATES_OF[id(rules)].which(text)
    if which is None:  # the usual text: one pass, no hit possible
        return []
    names = _ANCHORS_OF[id(rules)]
    marks, spelled, singles, multis = which[len(names):]
    anchors = any(which[:len(names)])
    folded: bytes | None = None
    if text.isascii():
        folded = text.encode("ascii").translate(_LOWER)
        chars = _char_hits(text) if marks and b"\0" in folded else []
    else:
        chars = _char_hits(text) if marks else []
    # normalizing can change what is found: a character it changes can make (or be inside) an
    # anchor, or stand inside a phrase around one; or what the character hits take out joins one
    changed = multis or (singles and (spelled or bool(chars)))
    if not chars and not changed:
        if not anchors:  # no anchor, and nothing to take out or replace that could hide one
            return []
        absent = frozenset(name for name, found in zip(names, which) if not found)
        hits = _phrase_hits(text, rules, folded, absent)
        return _merge(hits) if hits else hits
    # phrases in the text with the invisible and terminal hits taken out, normalized, mapped back;
    # a zero-width space is read both as nothing (inside a word) and as a space (between two)
    chars = _merge(chars)
    drop = [(hit.start, hit.end) for hit in chars]
    found = list(chars)
    for zwsp_as_space in (False, True) if changed and "\u200b" in text else (False,):
        mapped = for_phrases(text, drop, zwsp_as_space, normalize=changed)
        for hit in _phrase_hits(mapped.text, rules):
            start, end = mapped.span(hit.start, hit.end)
            found.append(hit._replace(start=start, end=end))
    return _merge(found)


GATE: Final = _gate(_INJECTION)  # find_injection's first look (assay.inspect.scan asks it too)
_GATES_OF: Final = {id(_INJECTION): GATE, id(_ALL): _gate(_ALL)}
_ANCHORS_OF: Final = {id(_INJECTION): _anchors(_INJECTION), id(_ALL): _anchors(_ALL)}


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
        parts.append(text[at:hit.start])
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
    return head + _INVISIBLE_SINGLES.sub("", out[len(head):]), hits
