"""Secrets in text and JSON values: find them, redact them (docs/inspect.md, "Secrets").

A rule set written for this project: each rule has a ``kind`` (the table :data:`KINDS`, also in
docs/inspect.md) and one regular expression. Every expression runs in linear time: Python's
``re`` with bounded repetitions, possessive quantifiers where a repetition is followed by more
pattern, and no nested quantifier that can backtrack (tests/inspect/test_secrets.py feeds them
long adversarial inputs under a time limit).

- :func:`find_secrets`: the secrets of one string, as ``(kind, start, end)`` spans, sorted,
  never overlapping (overlapping matches are merged: no part of a secret is left out).
- :func:`redact_text`: the string with each secret replaced by ``[REDACTED:<kind>]``.
- :func:`redact_value`: a JSON value with every string redacted, and every value under a
  secret-named key (:data:`SECRET_KEYS`) replaced whole, whatever its shape. Depth-bounded;
  never raises on content (lone surrogates, deep nesting, huge strings).

Sans-IO and stateless; the standard library only.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from assay.inspect.prefilter import Prefilter, literal

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
    "redact_head",
    "redact_text",
    "redact_value",
]

MAX_DEPTH: Final = 64  # containers nested deeper are replaced whole (kind "depth_limit")
MAX_FINDINGS: Final = 1024  # findings kept per redact_value call (redaction itself is not capped)
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


_HERE: Final = (0,)  # a match starts where its finder's hit does


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...]  # the rule can match only where one of these occurs
    lower: bool = False  # the hints (and the finder) are ASCII case-insensitive
    group: int = 0  # the group that is the secret (0: the whole match)
    check: Callable[[re.Match[str]], bool] | None = None
    # Where a match can start (see _matches): no finders, the pattern starts with a literal that
    # re searches fast by itself; else regexes that start with a literal and match wherever the
    # pattern does, ``back`` characters on, for a back in backs (their hits lie further apart
    # than the largest back). They search the text with its non-ASCII characters as "?" (their
    # classes hold neither), or its ASCII-lowercased bytes when ``lower``; with ``scheme`` the
    # text itself: a hit is the "://" of a URL, the start is that of its scheme.
    finders: tuple[re.Pattern[Any], ...] = ()
    # for the prefilter, when the hints let through too much: regexes of the JSON Schema pattern
    # dialect, one of which matches the text (non-ASCII characters as "?") wherever this rule does
    near: tuple[str, ...] = ()
    backs: tuple[int, ...] = _HERE
    scheme: bool = False


def _jwt_header(match: re.Match[str]) -> bool:
    """A JWT's first part decodes (base64url) to a JSON object with an ``alg`` member."""
    head = match.group(0).split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
        value = json.loads(decoded)
    except (ValueError, binascii.Error, RecursionError):
        return False
    return isinstance(value, dict) and "alg" in value


def _not_a_word(match: re.Match[str]) -> bool:
    """A token of letters only is a word of prose (``Bearer authentication``), not a token."""
    return not match.group(1).isalpha()


def _auth_value(match: re.Match[str]) -> bool:
    """An ``Authorization`` value: after a scheme (``Basic``, ``Bearer``, ...) anything; without
    one, not a word of letters only."""
    return match.group(1) is not None or not match.group(2).isalpha()


def _compile(pattern: str) -> re.Pattern[str]:
    """ASCII only: ``\\s`` is ASCII white space, and ``(?i:...)`` folds ASCII letters only (so
    the lowercased-text hints of a case-insensitive rule never miss a match)."""
    return re.compile(pattern, re.ASCII)


def _fold(word: str) -> str:
    return literal(word, fold=True)


def _at(*patterns: Any) -> tuple[re.Pattern[Any], ...]:
    """Finders: regexes of literals (bytes for a case-insensitive rule: they search the
    lowercased text)."""
    return tuple(re.compile(pattern, re.ASCII) for pattern in patterns)


_L = r"(?<![A-Za-z0-9])"  # not inside a longer word
_PEM_HEAD = r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"

_RULES: Final[tuple[_Rule, ...]] = (
    _Rule("private_key", _compile(
        # the body runs to the next "-----" (possessive: it never gives characters back); the
        # END line is optional so that a cut key is redacted too
        _PEM_HEAD + r"(?:[^-]|-(?!----)){0,24000}+(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
    ), ("PRIVATE KEY",)),
    _Rule("aws_access_key_id", _compile(_L + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
          ("AKIA", "ASIA", "ABIA", "ACCA"), finders=_at("AKIA|ASIA|ABIA|ACCA")),
    _Rule("aws_secret_access_key", _compile(
        r"(?i:secret[_\-. ]?(?:access[_\-. ]?)?key)[\"']?[ \t]{0,8}+[:=]{1,2}+>?[ \t]{0,8}+[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
    ), ("secret",), lower=True, group=1, finders=_at(rb"secret[_\-. ]?(?:access[_\-. ]?)?key[\"']?[ \t]{0,8}+[:=]"),
          near=(_fold("secret") + r"[_\-. ]?(?:" + _fold("access") + r"[_\-. ]?)?" + _fold("key") + r"[\"']?[ \t]{0,8}[:=]",)),
    _Rule("gcp_api_key", _compile(r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"), ("AIza",)),
    _Rule("azure_storage_key", _compile(r"(?i:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,200}+={0,2}+)"),
          ("accountkey=", "sharedaccesskey="), lower=True, group=1,
          finders=_at(b"accountkey=", b"sharedaccesskey=")),
    _Rule("github_token", _compile(_L + r"(?:gh[pousr]_[A-Za-z0-9]{36,1024}+|github_pat_[A-Za-z0-9_]{22,1024}+)"),
          ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), finders=_at("gh[pousr]_|github_pat_")),
    _Rule("gitlab_token", _compile(_L + r"glpat-[A-Za-z0-9_\-]{20,1024}+"), ("glpat-",), finders=_at("glpat-")),
    _Rule("npm_token", _compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,1024}+"), ("npm_",), finders=_at("npm_")),
    _Rule("pypi_token", _compile(r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{20,4096}+"),
          ("pypi-AgE",)),
    _Rule("slack_webhook", _compile(
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{10,1024}+"
    ), ("hooks.slack.com/",)),
    _Rule("slack_token", _compile(_L + r"xox[abeprs]-[A-Za-z0-9\-]{10,1024}+"), ("xox",),
          finders=_at("xox[abeprs]-")),
    _Rule("stripe_key", _compile(_L + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,1024}+"),
          ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), finders=_at("k_(?:live|test)_"), backs=(1,)),
    _Rule("jwt", _compile(
        r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,4096}+\.[A-Za-z0-9_\-]{2,16384}+\.[A-Za-z0-9_\-]{0,4096}+"
    ), ("eyJ",), check=_jwt_header, finders=_at("eyJ")),
    _Rule("authorization", _compile(
        _L + r"(?i:(?:proxy-)?authorization)[\"']?[ \t]{0,8}+[:=][ \t]{0,8}+[\"']?"
        r"((?i:basic|bearer|token|digest|negotiate)[ \t]{1,8}+)?([^\s\"',;]{8,8192}+)"
    ), ("authorization",), lower=True, group=2, check=_auth_value, backs=(6, 0),
          finders=_at(rb"authorization[\"']?[ \t]{0,8}+[:=]"), near=(_fold("authorization") + r"[\"']?[ \t]{0,8}[:=]",)),
    _Rule("bearer_token", _compile(_L + r"(?i:bearer)[ \t]{1,8}+([A-Za-z0-9\-._~+/]{16,8192}+=*+)"),
          ("bearer",), lower=True, group=1, check=_not_a_word, finders=_at(rb"bearer[ \t]{1,8}+[a-z0-9\-._~+/]{16}"),
          near=(_fold("bearer") + r"[ \t]{1,8}[A-Za-z0-9\-._~+/]{16}",)),
    _Rule("url_password", _compile(
        # scheme://user:password@host: only the password
        r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,31}+://[^\s/?#@:\"'<>\[\]]{0,256}+:"
        r"([^\s/?#@\"'<>]{1,256}+)@"
    ), ("://",), group=1, scheme=True,
          finders=_at(r"://[^\s/?#@:\"'<>\[\]]{0,256}+:[^\s/?#@\"'<>]{1,256}+@"),
          # "?" stands for any non-ASCII character in the prefilter's text: let it through
          near=(r"://[^ \t\n\r\f\v/#@:\"'<>\[\]]{0,256}:[^ \t\n\r\f\v/#@\"'<>]{1,256}@",)),
)

KINDS: Final[dict[str, str]] = {
    "private_key": "a PEM private key block (RSA, EC, DSA, PKCS#8, encrypted, OpenSSH, PGP), "
                   "BEGIN line to END line (or to the end of the text when cut)",
    "aws_access_key_id": "an AWS access key id: AKIA, ASIA, ABIA or ACCA and 16 capitals or digits",
    "aws_secret_access_key": "40 base64 characters labelled as a secret (access) key "
                             "(aws_secret_access_key=..., \"SecretAccessKey\": \"...\"): the value only",
    "gcp_api_key": "a Google API key: AIza and 35 characters",
    "azure_storage_key": "the value of AccountKey= or SharedAccessKey= (Azure connection strings)",
    "github_token": "a GitHub token: ghp_, gho_, ghu_, ghs_, ghr_ and 36+ characters, or github_pat_",
    "gitlab_token": "a GitLab personal access token: glpat- and 20+ characters",
    "npm_token": "an npm access token: npm_ and 36+ letters and digits",
    "pypi_token": "a PyPI (or TestPyPI) API token: pypi-AgEIcHlwaS5vcmc...",
    "slack_webhook": "a Slack webhook URL (https://hooks.slack.com/services/...)",
    "slack_token": "a Slack token: xoxa-, xoxb-, xoxe-, xoxp-, xoxr-, xoxs-",
    "stripe_key": "a Stripe secret or restricted key: sk_live_, sk_test_, rk_live_, rk_test_",
    "jwt": "a JSON Web Token: three base64url parts whose header is a JSON object with \"alg\"",
    "authorization": "the credentials of an Authorization (or Proxy-Authorization) header or "
                     "member, after its scheme (Basic, Bearer, ...)",
    "bearer_token": "the token after Bearer (16+ characters, not a word of letters only)",
    "url_password": "the password of a URL scheme://user:password@host (user and host are kept)",
}
"""kind -> what it covers, for every rule of :func:`find_secrets` (docs/inspect.md)."""

# redact_value: a value under one of these keys is replaced whole. A key is compared lowercased,
# with "-", "_", "." and spaces taken out; it names a secret when it is one of the exact names, or
# ends in one of the suffixes.
_KEY_EXACT: Final[dict[str, str]] = {
    "password": "password", "passwd": "password", "pwd": "password", "passphrase": "password",
    "secret": "secret", "token": "token", "apikey": "api_key", "authorization": "authorization",
    "proxyauthorization": "authorization", "cookie": "cookie", "setcookie": "cookie",
    "privatekey": "private_key",
}
_KEY_SUFFIXES: Final[tuple[tuple[str, str], ...]] = (
    ("password", "password"), ("passphrase", "password"), ("secret", "secret"), ("secretkey", "secret"),
    ("secretaccesskey", "secret"), ("token", "token"), ("apikey", "api_key"), ("privatekey", "private_key"),
)
SECRET_KEYS: Final[dict[str, str]] = dict(_KEY_EXACT)
"""Exact secret key names (normalized) -> kind; suffixes in docs/inspect.md."""
KEY_KINDS: Final = ("password", "secret", "token", "api_key", "authorization", "cookie", "private_key")
_KEY_STRIP: Final = str.maketrans("", "", "-_. ")


def key_kind(key: str) -> str | None:
    """The kind a value under ``key`` is redacted as, whatever it holds, or None."""
    if len(key) > 128:
        return None
    norm = key.lower().translate(_KEY_STRIP)
    kind = _KEY_EXACT.get(norm)
    if kind is not None:
        return kind
    for suffix, kind in _KEY_SUFFIXES:
        if norm.endswith(suffix):
            return kind
    return None


# two groups: the words of prose (secret, bearer, ://, ...), often there, and the token prefixes
_WORDS: Final = [i for i, rule in enumerate(_RULES) if rule.lower or rule.scheme]
_PREFILTER: Final = Prefilter([rule.near or [literal(hint, rule.lower) for hint in rule.hints] for rule in _RULES],
                             [_WORDS, [i for i in range(len(_RULES)) if i not in _WORDS]])
_NONE: Final = 1 << 62  # no hit
_RUN_BACK: Final = re.compile(r"[A-Za-z0-9+.\-]{0,33}", re.ASCII)  # a URL scheme, read backwards


def _scheme_start(text: str, colon: int) -> int:
    """Where the scheme of the URL whose ``://`` is at ``colon`` starts, or -1 when it cannot be a
    url_password match: the run of scheme characters before ``colon`` is empty or longer than
    the pattern's 32 (a match starts where the run does: its look-behind refuses a scheme
    character before it, so nowhere inside the run)."""
    run = _RUN_BACK.match(text[max(0, colon - 33):colon][::-1])
    length = run.end() if run is not None else 0
    return colon - length if 0 < length <= 32 else -1


def _matches(rule: _Rule, text: str, plain: str, lowered: bytes) -> Iterator[re.Match[str]]:
    """What ``rule.pattern.finditer(text)`` yields, found by trying the pattern only where a
    finder says a match can start: the same leftmost, non-overlapping matches, since every
    position where the pattern matches is among those tried, in increasing order, from the end
    of the last match on. The finders search ``plain`` (``text`` with every non-ASCII character
    replaced by "?") or ``lowered`` (``plain`` lowercased, as bytes): same positions."""
    if not rule.finders:
        yield from rule.pattern.finditer(text)
        return
    haystack: str | bytes = lowered if rule.lower else text if rule.scheme else plain
    match, backs, scheme = rule.pattern.match, rule.backs, rule.scheme
    at = 0  # where finditer would go on searching
    if len(rule.finders) == 1 and backs is _HERE and not scheme:  # the common case, short
        search = rule.finders[0].search
        while (hit := search(haystack, at)) is not None:
            if (found := match(text, hit.start())) is None:
                at = hit.start() + 1
            else:
                yield found
                at = found.end()
        return
    searches = [finder.search for finder in rule.finders]
    nexts = [-1] * len(searches)  # each finder's first hit from ``at`` on (_NONE: none)
    while True:
        for i, search in enumerate(searches):
            if nexts[i] < at:
                hit = search(haystack, at)
                nexts[i] = _NONE if hit is None else hit.start()
        pos = min(nexts)
        if pos == _NONE:
            return
        found = None
        if scheme:
            start = _scheme_start(text, pos)
            if start >= at:
                found = match(text, start)
        elif backs is _HERE:
            found = match(text, pos)
        else:
            for back in backs:
                if pos - back >= at and (found := match(text, pos - back)) is not None:
                    break
        if found is None:
            at = pos + 1
        else:
            yield found
            at = found.end()


def find_secrets(text: str) -> list[Secret]:
    """The secrets in ``text``, sorted by position, never overlapping: where two matches overlap
    (a GitHub token after ``Authorization: Bearer``) they become one span of the kind that starts
    first (at one start: the longer, then the rule listed first in :data:`KINDS`).

    Only the rules whose literals occur are run (one pass, :class:`~assay.inspect.prefilter.Prefilter`), each from the
    places where a match can start (docs/inspect.md, "Speed")."""
    if len(text) < _MIN_SECRET_CHARS:
        return []
    raw = b""
    plain = text
    if not text.isascii():  # one byte per character ("?" for the others): positions are the text's
        raw = text.encode("ascii", "replace")
        plain = raw.decode("ascii")
    which = _PREFILTER.which(plain)
    if which is None:
        return []
    lowered = b""
    found: list[tuple[int, int, int, str]] = []
    for order, rule in enumerate(_RULES):
        if not which[order]:
            continue
        if rule.lower and not lowered:
            lowered = (raw or text.encode("ascii")).lower()
        check, group = rule.check, rule.group
        for match in _matches(rule, text, plain, lowered):
            if check is not None and not check(match):
                continue
            start, end = match.span(group)
            if end > start:
                found.append((start, -end, order, rule.kind))
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
    secrets = find_secrets(text)
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
