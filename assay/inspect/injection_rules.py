"""The rules of the injection detector (docs/inspect.md, "Injected instructions" and "Poisoned
tool descriptions"), for :mod:`assay.inspect.injection`.

- character rules (kinds ``invisible`` and ``terminal``): a Python ``str`` expression over the
  text: Unicode tag characters, runs of zero-width characters or variation selectors, bidi
  controls, terminal escape sequences and control characters;
- phrase rules (kinds ``phrase``, and for tool descriptions ``file_read``, ``exfiltration``,
  ``secrecy``): a ``bytes`` expression over the text encoded as UTF-8 with ASCII letters
  lowercased (case-insensitive, whitespace-flexible), and its anchors: words every match
  contains, within a margin of bytes on either side.

Every expression has bounded repetitions only (possessive where more pattern follows), so the
work is linear in the length of the text (tests/inspect/test_injection.py feeds each rule a
megabyte of adversarial input under a time limit). :data:`RULES` is the table docs/inspect.md
shows. Plain data and the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Final

__all__ = [
    "CHARS",
    "CHAR_ANY",
    "CHAR_KIND",
    "CHAR_RULES",
    "GATE_CHARS",
    "INJECTION",
    "LOWER",
    "MARGIN",
    "ORDER",
    "POISON",
    "RULES",
    "Phrase",
]


# ---------------------------------------------------------------- character rules (str)

CHAR_RULES: Final[tuple[tuple[str, str, str, str], ...]] = (
    (
        "invisible",
        "tag_characters",
        "[\U000e0000-\U000e007f]{1,4096}+",
        "Unicode tag characters U+E0000 to U+E007F (invisible ASCII), any",
    ),
    (
        "invisible",
        "zero_width_run",
        "[\u200b\u200c\u200d\u2060\ufeff]{2,4096}+",
        "two or more zero-width characters in a row (U+200B, U+200C, U+200D, U+2060, U+FEFF)",
    ),
    (
        "invisible",
        "variation_selector_run",
        "[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,4096}+",
        "two or more variation selectors in a row (one follows a character; more hide bytes)",
    ),
    (
        "invisible",
        "bidi_override",
        "[\u202a-\u202e\u2066-\u2069]{1,4096}+",
        "bidi embedding, override and isolate controls U+202A to U+202E, U+2066 to U+2069",
    ),
    (
        "terminal",
        "ansi_escape",
        "\x1b(?:\\[[\x30-\x3f]{0,64}+[\x20-\x2f]{0,16}+[\x40-\x7e]?"
        "|[\\]PX^_][^\x07\x1b\x9c]{0,4096}+(?:\x07|\x1b\\\\|\x9c)?"
        "|[\x20-\x2f]{0,16}+[\x30-\x7e]?)",
        "ESC (U+001B) and the sequence it starts: CSI, OSC and other strings, other ESC x",
    ),
    (
        "terminal",
        "c1_csi",
        "\x9b[\x30-\x3f]{0,64}+[\x20-\x2f]{0,16}+[\x40-\x7e]?",
        "the C1 control sequence introducer U+009B and its sequence",
    ),
    ("terminal", "c1_control", "[\x80-\x9a\x9c-\x9f]{1,4096}+", "other C1 controls U+0080 to U+009F"),
    (
        "terminal",
        "control_character",
        "[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]{1,4096}+",
        "C0 controls and DEL, except tab, line feed, carriage return and form feed",
    ),
)
CHARS: Final = re.compile("|".join(f"(?P<{rule}>{pattern})" for _k, rule, pattern, _d in CHAR_RULES))
# one character class of every character rule's first character: a quick look first
CHAR_ANY: Final = re.compile(
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f"
    "\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
CHAR_KIND: Final = {rule: kind for kind, rule, _p, _d in CHAR_RULES}

# ASCII letters lowercased; the controls of the character rules (and ESC) become NUL, so that
# ``b"\0" in`` tells whether an ASCII text needs the character rules at all
_FOLD = bytearray(range(256))
for _c in range(0x41, 0x5B):
    _FOLD[_c] = _c + 0x20
for _c in (*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F):
    _FOLD[_c] = 0
LOWER: Final = bytes(_FOLD)

# ---------------------------------------------------------------- phrase rules (bytes)

_WS = rb"(?:[ \t\n\r\x0c]|\xc2\xa0|\xe2\x80[\x80-\x8b\xa8\xa9\xaf]|\xe2\x81[\x9f\xa0]|\xe3\x80\x80)"
S = _WS + rb"{1,8}+"  # whitespace between words: 1 to 8 spaces, tabs, line breaks, NBSP, ...
W = rb"[a-z0-9'\-]{1,24}+"  # one word
_INSTR = rb"instructions?\b"
_NOT = rb"(?:do" + S + rb"not|don't|don\xe2\x80\x99t|dont|never)"
_ARG = rb"(?:parameter|argument|field|param|arg)s?\b"
MARGIN: Final = 512  # more than any phrase match's bytes on either side of its anchor (a test checks)


@dataclass(frozen=True)
class Phrase:
    kind: str
    rule: str
    source: bytes
    anchors: tuple[bytes, ...]  # every match contains one of these
    gate: bytes = b""  # and this byte (a cheap look first)
    before: int = MARGIN  # a match starts at most this many bytes before its anchor
    after: int = MARGIN  # and ends (look-ahead included) at most this many after it

    @cached_property
    def pattern(self) -> re.Pattern[bytes]:
        """The compiled rule (on first use: most texts never need most rules)."""
        return re.compile(self.source, re.MULTILINE)


def _p(
    kind: str,
    rule: str,
    pattern: bytes,
    anchors: tuple[bytes, ...],
    gate: bytes = b"",
    before: int = MARGIN,
    after: int = MARGIN,
) -> Phrase:
    return Phrase(kind, rule, pattern, anchors, gate, before, after)


INJECTION: Final[tuple[Phrase, ...]] = (
    _p(
        "phrase",
        "ignore_previous",
        rb"\b(?:ignore|disregard|skip|bypass|override)" + S + rb"(?:all" + S + rb")?(?:(?:of" + S + rb")?"
        rb"(?:the|your|any|my|these|those)" + S + rb")?(?:previous|prior|above|earlier|preceding|foregoing|"
        rb"former|original|initial|old|system)" + S + rb"(?:(?:system|developer|user)" + S + rb")?" + _INSTR,
        (b"instruct",),
        before=200,
        after=40,
    ),
    _p(
        "phrase",
        "disregard_instructions",
        rb"\bdisregard" + S + rb"(?:" + W + S + rb"){0,6}?" + _INSTR,
        (b"instruct",),
        before=340,
        after=40,
    ),
    _p(
        "phrase",
        "forget_instructions",
        rb"\bforget" + S + rb"(?:(?:all|about|everything|any)" + S + rb")?(?:(?:of|about)" + S + rb")?"
        rb"(?:(?:your|the|previous|prior|above|earlier|my|these|those|original)" + S + rb"){1,2}" + _INSTR,
        (b"instruct",),
        before=160,
        after=40,
    ),
    _p(
        "phrase",
        "new_instructions",
        rb"\b(?:new|updated|revised|real|actual|true|additional|secret)"
        + S
        + rb"(?:(?:system|important)"
        + S
        + rb")?instructions?[ \t]{0,4}+:",
        (b"instruct",),
        b":",
        80,
        40,
    ),
    _p(
        "phrase",
        "you_are_now",
        rb"\byou(?:" + S + rb"are|'re|\xe2\x80\x99re)" + S + rb"now" + S + rb"(?:"
        rb"(?:a|an|the|my|your)" + S + rb"(?:" + W + S + rb"){0,3}?(?:ai|assistant|chatbot|persona|llm|"
        rb"language" + S + rb"model|ai" + S + rb"model)\b"
        rb"|(?:in" + S + rb")?(?:developer|god|jailbreak|jailbroken|dan|unrestricted|unfiltered|uncensored|evil)\b"
        rb"|(?:acting|playing|roleplaying|role-playing|pretending)" + S + rb"(?:as|to)\b"
        rb"|no" + S + rb"longer" + S + rb"(?:bound|restricted|limited|an?" + S + rb"ai)\b)",
        (b"now",),
        b"",
        80,
        240,
    ),
    _p(
        "phrase",
        "role_marker",
        rb"^[ \t]{0,8}+(?:>[ \t]{0,4}+)?(?:\*\*|__)?(?:system|assistant)(?:\*\*|__)?[ \t]{0,4}+:(?:\*\*|__)?"
        rb"(?=[ \t]{1,8}+(?:[a-z][a-z',.!?\-]{0,30}+[ \t]{1,4}+){2}[a-z])",
        (b"system", b"assistant"),
        b":",
        40,
        120,
    ),
    _p(
        "phrase",
        "role_marker",
        rb"^#{1,6}+[ \t]{1,4}+(?:system|assistant)(?:[ \t]{1,4}+(?:prompt|message|instructions?))?[ \t]{0,4}+:"
        rb"|^#{1,6}+[ \t]{1,4}+(?:system|assistant)[ \t]{1,4}+(?:prompt|message)[ \t]{0,4}+$",
        (b"system", b"assistant"),
        b"#",
        40,
        60,
    ),
    _p(
        "phrase",
        "chat_token",
        rb"<\|(?:im_start|im_end|im_sep|endoftext|system|user|assistant|begin_of_text|start_header_id|"
        rb"end_header_id|eot_id)\|>|<</?sys>>",
        (b"|>", b"sys>>"),
        b"<",
        24,
        24,
    ),
    _p("phrase", "chat_token", rb"\[/?inst\]", (b"inst]",), b"[", 8, 8),
    _p(
        "phrase",
        "important_tag",
        rb"</?(?:important|instructions?)(?:[ \t\r\n/][^<>]{0,200}+)?>"
        rb"|<(?:system(?:[-_](?:prompt|message|reminder|instructions?))?|secret)(?:[ \t\r\n][^<>]{0,200}+)?>"
        rb"(?![ \t]{0,4}+[a-z0-9_.\-]{1,40}+[ \t]{0,4}+</)",
        (b"important", b"instruct", b"system", b"<secret"),
        b"<",
        8,
        320,
    ),
    _p(
        "phrase",
        "do_not_tell_user",
        _NOT
        + S
        + rb"(?:tell|inform|(?:mention|reveal|disclose)(?:"
        + S
        + W
        + rb"){0,3}?"
        + S
        + rb"to)"
        + S
        + rb"(?:the"
        + S
        + rb")?user\b(?!'|\xe2\x80\x99)",
        (b"user",),
        b"",
        300,
        16,
    ),
)

_PATHS = (
    rb"(?:~/\.ssh\b|\.ssh/|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|(?<![a-z0-9_.\-])\.env\b|\.aws/(?:credentials|config)\b"
    rb"|\.netrc\b|/etc/(?:passwd|shadow)\b|\.npmrc\b|\.pypirc\b|\.git-credentials\b|\.docker/config\.json"
    rb"|\.kube/config\b|\b(?:your|the|the"
    + S
    + rb"user's|their|my)"
    + S
    + rb"(?:ssh"
    + S
    + rb")?private"
    + S
    + rb"keys?\b)"
)
_OBJECT = (
    rb"(?:it|them|its" + S + rb"contents?|the" + S + rb"(?:contents?|key|keys|file" + S + rb"contents|credentials?"
    rb"|tokens?|secrets?|passwords?|conversation(?:" + S + rb"history)?|chat" + S + rb"history|system" + S + rb"prompt)"
    rb"(?:" + S + rb"of" + S + rb"[^\n<>]{1,60}?)?)"
)

POISON: Final[tuple[Phrase, ...]] = (
    _p(
        "file_read",
        "read_sensitive_file",
        rb"\b(?:read|open|cat|include|load|print|dump|output|attach|access|fetch|get|grab|copy|upload|send|"
        rb"provide|return|base64)\b[^\n]{0,80}?" + _PATHS,
        (
            b"ssh",
            b"id_",
            b".env",
            b".aws",
            b".netrc",
            b"passwd",
            b"shadow",
            b".npmrc",
            b".pypirc",
            b"credentials",
            b".docker",
            b".kube",
            b"private",
        ),
    ),
    _p(
        "exfiltration",
        "pass_it_as",
        rb"\bpass"
        + S
        + _OBJECT
        + S
        + rb"(?:as|in|into|via|through)"
        + S
        + rb"(?:(?:the|a|an|your)"
        + S
        + rb")?(?:[`'\"]?[a-z0-9_\-]{1,64}+[`'\"]?"
        + S
        + rb")?"
        + _ARG,
        (b"pass",),
    ),
    _p(
        "exfiltration",
        "send_to",
        rb"\bsend"
        + S
        + rb"(?:"
        + _OBJECT
        + rb"|everything|all"
        + S
        + rb"of"
        + S
        + rb"(?:it|this|them))"
        + S
        + rb"(?:back"
        + S
        + rb")?to\b",
        (b"send",),
    ),
    _p(
        "exfiltration",
        "include_in_argument",
        rb"\binclude"
        + S
        + _OBJECT
        + S
        + rb"(?:verbatim"
        + S
        + rb")?(?:in|into|as|inside|within)"
        + S
        + rb"(?:(?:the|a|an|your)"
        + S
        + rb")?(?:[`'\"]?[a-z0-9_\-]{1,64}+[`'\"]?"
        + S
        + rb")?"
        + _ARG,
        (b"include",),
    ),
    _p(
        "exfiltration",
        "content_as_argument",
        rb"\b(?:it|them|contents?)"
        + S
        + rb"as"
        + S
        + rb"(?:the|a|an)"
        + S
        + rb"[`'\"]?[a-z0-9_\-]{1,64}+[`'\"]?"
        + S
        + _ARG,
        (b"param", b"arg", b"field"),
    ),
    _p(
        "secrecy",
        "dont_mention",
        _NOT
        + S
        + rb"(?:mention|reveal|disclose|tell|explain|acknowledge|share)"
        + S
        + rb"(?:this|that|these|any"
        + S
        + rb"of"
        + S
        + rb"(?:this|these|it)|the"
        + S
        + rb"(?:above|following|instructions?|note|notes|request|step|steps|fact|reason))\b",
        (b"mention", b"reveal", b"disclose", b"tell", b"explain", b"acknowledge", b"share"),
    ),
    _p(
        "secrecy",
        "without_telling",
        rb"\bwithout" + S + rb"(?:telling|informing)" + S + rb"(?:the" + S + rb")?user\b",
        (b"without",),
    ),
    _p(
        "secrecy",
        "user_must_not_know",
        rb"\buser"
        + S
        + rb"(?:must|should|shall|may|can|needs?"
        + S
        + rb"to)"
        + S
        + rb"(?:not|never)"
        + S
        + rb"(?:know|notice|find"
        + S
        + rb"out|learn|be"
        + S
        + rb"(?:told|informed|aware))\b"
        rb"|\b(?:keep|hide)"
        + S
        + rb"(?:this|it|these"
        + S
        + rb"instructions)"
        + S
        + rb"(?:secret"
        + S
        + rb")?from"
        + S
        + rb"(?:the"
        + S
        + rb")?user\b",
        (b"user",),
    ),
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


# every character a character rule can start with (a superset: a single ZWJ in an emoji passes,
# the full scan then finds no hit)
GATE_CHARS: Final = (  # the characters themselves: the dialect has no escape beyond U+FFFF
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff\ufe00-\ufe0f\u202a-\u202e\u2066-\u2069"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


def _rule_table() -> tuple[tuple[str, str, str], ...]:
    out = [(kind, rule, doc) for kind, rule, _p, doc in CHAR_RULES]
    seen = set()
    for phrase in INJECTION + POISON:
        if phrase.rule not in seen:
            seen.add(phrase.rule)
            out.append((phrase.kind, phrase.rule, _DOCS[phrase.rule]))
    return tuple(out)


RULES: Final = _rule_table()
"""(kind, rule id, what it matches) of every rule; docs/inspect.md has the same table."""
ORDER: Final = {rule: i for i, (_k, rule, _d) in enumerate(RULES)}
