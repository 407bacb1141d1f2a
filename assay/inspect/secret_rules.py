"""The secret rules and how each is searched (docs/inspect.md, "Secrets"), for
:mod:`assay.inspect.secrets`.

Each rule has a ``kind`` (the table :data:`KINDS`) and one regular expression that runs in
linear time: Python's ``re`` with bounded repetitions, possessive quantifiers where a repetition
is followed by more pattern, and no nested quantifier that can backtrack. :func:`matches` yields
what ``pattern.finditer(text)`` would, but tries the pattern only where the rule's trigger says a
match can start (one pass for every rule's trigger: :mod:`assay.inspect.places`), and
:data:`PREFILTER` (one pass of google-re2's set over the text) says which rules can match at all
(docs/inspect.md, "Speed").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Final

from assay.inspect.normalize import ignorable_class
from assay.inspect.places import Trigger, shared_numbers
from assay.inspect.prefilter import Prefilter, literal
from assay.inspect.secret_keys import ASSIGNED_KINDS, assigned_value, key_kind, placeholder

__all__ = ["IGNORABLE", "KINDS", "PREFILTER", "RULES", "TRIGGERS", "Rule", "matches"]

_HERE: Final = (0,)  # a match starts where its finder's hit does


@dataclass(frozen=True)
class Rule:
    kind: str
    source: str  # the regex (ASCII: \\s is ASCII white space, (?i:...) folds ASCII letters only)
    hints: tuple[str, ...]  # the rule can match only where one of these occurs
    # Where a match can start (see matches): where the trigger matches the text's UTF-8 (every
    # place the pattern matches is ``back`` characters before one of them, for a back in backs;
    # their hits lie further apart than the largest back); with ``start``, a hit is somewhere
    # in a match's first word and ``start(text, hit)`` says where that word (the only place a
    # match can start) begins, or -1.
    trigger: Trigger
    lower: bool = False  # the hints are ASCII case-insensitive
    group: int = 0  # the group that is the secret (0: the whole match)
    check: Callable[[re.Match[str]], bool] | None = None
    # for the prefilter, when the hints let through too much: RE2 regexes, one of which matches
    # the text wherever this rule does (a superset: small for RE2's automaton)
    near: tuple[str, ...] = ()
    backs: tuple[int, ...] = _HERE
    start: Callable[[str, int], int] | None = None
    # a rule whose kind depends on the match: (kind, start, end) of the secret, or None (no check,
    # no group then)
    pick: Callable[[re.Match[str]], tuple[str, int, int] | None] | None = None

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The compiled rule (on first use: most texts never need most rules)."""
        return re.compile(self.source, re.ASCII)


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


_PLACEHOLDER = re.compile(
    r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%"
    r"|[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)++",  # a variable's name: wrap's --header-env Authorization=ASSAY_HEADER_1
    re.ASCII,
)


_CODE_CALL: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*+\(", re.ASCII)


def _auth_value(match: re.Match[str]) -> bool:
    """An ``Authorization`` value: after a scheme (``Basic``, ``Bearer``, ...) anything; without
    one, not a word of letters only. A reference to an environment variable (``${TOKEN}``,
    ``$TOKEN``, ``%TOKEN%``, or a name such as ``API_TOKEN``: what a configuration holds in the
    place of a token) is no secret."""
    value = match.group(2)
    if _PLACEHOLDER.fullmatch(value) or _PLACEHOLDER.fullmatch(value.rstrip("`)]}>.")):  # quoted in prose too
        return False
    if match.group(1) is None and _CODE_CALL.match(value):  # authorization = any(...): code, not a header
        return False
    return match.group(1) is not None or not match.group(2).isalpha()


def _random(value: str) -> bool:
    """A token drawn at random, not a name: letters of both cases and a digit, or a long run of
    them without the hyphens and underscores that join the words of a name."""
    body = value.replace("-", "").replace("_", "")
    return (
        any(c.isdigit() for c in body)
        and any(c.islower() for c in body)
        and any(c.isupper() for c in body)
        and value.count("-") + value.count("_") <= len(value) // 12 + 2
    )


def _random_key(match: re.Match[str]) -> bool:
    return "T3BlbkFJ" in match.group(0) or _random(match.group(1))


def _mixed_case(match: re.Match[str]) -> bool:
    """A Hugging Face token is 34 letters of both cases (a name of letters is one case, or words)."""
    body: str = match.group(1)
    return sum(c.isupper() for c in body) >= 3 and sum(c.islower() for c in body) >= 3


def _url_password(match: re.Match[str]) -> bool:
    """A URL's password, unless it is a placeholder (``postgres://user:password@host``,
    ``redis://:changeme@``, ``https://u:...@h``: what docs and example files show)."""
    return not placeholder(match.group(1))


_LINE_HEAD: Final = re.compile(r"[ \t]*+(?:(?:export|set|ENV|ARG)[ \t]++|-[ \t]++)?", re.ASCII)


def _assignment(match: re.Match[str]) -> tuple[str, int, int] | None:
    """A value assigned to a key that names a secret (:func:`~assay.inspect.secret_keys.key_kind`),
    when it is one (:func:`~assay.inspect.secret_keys.assigned_value`): the kind is the key's."""
    kind = key_kind(match["key"])
    if kind not in ASSIGNED_KINDS:
        return None
    name = "dq" if match["dq"] is not None else "sq" if match["sq"] is not None else "bare"
    value = match[name]
    literal = False
    if name == "bare" and match["op"] == "=" and match.end("key") + 1 == match.start(name):
        text, key_at = match.string, match.start("key")
        before = text[key_at - 1] if key_at else "\n"
        after = text[match.end()] if match.end() < len(text) else "\n"
        line_at = text.rfind("\n", 0, key_at) + 1
        literal = ((before in ";?&" or key_at == 0) and after in ";&\r\n") or (
            match["key"].isupper() and _LINE_HEAD.fullmatch(text, line_at, key_at) is not None
        )
    if not assigned_value(value, literal):
        return None
    start, end = match.span(name)
    return kind, start, end


_KEY_RUN: Final = re.compile(r"[A-Za-z0-9_.\-]{0,65}", re.ASCII)  # a key, read backwards


def _key_start(text: str, hit: int) -> int:
    """Where the key whose secret word is at ``hit`` starts: the run of key characters that
    ends there (a match starts where the run does: its look-behind refuses a key character before
    it), or -1 when the run is longer than a key (64 characters before the word)."""
    run = _KEY_RUN.match(text[max(0, hit - 65) : hit][::-1])
    length = run.end() if run is not None else 0
    return hit - length if length <= 64 else -1


_RUN_BACK: Final = re.compile(r"[A-Za-z0-9+.\-]{0,33}", re.ASCII)  # a URL scheme, read backwards


def _scheme_start(text: str, colon: int) -> int:
    """Where the scheme of the URL whose ``://`` is at ``colon`` starts, or -1 when it cannot be a
    url_password match: the run of scheme characters before ``colon`` is empty or longer than
    the pattern's 32 (a match starts where the run does: its look-behind refuses a scheme
    character before it, so nowhere inside the run)."""
    run = _RUN_BACK.match(text[max(0, colon - 33) : colon][::-1])
    length = run.end() if run is not None else 0
    return colon - length if 0 < length <= 32 else -1


def _compile(pattern: str) -> str:
    """A rule's regex, compiled on first use with ``re.ASCII``: ``\\s`` is ASCII white space,
    and ``(?i:...)`` folds ASCII letters only (so the lowercased-text hints of a
    case-insensitive rule never miss a match)."""
    return pattern


def _fold(word: str) -> str:
    return literal(word, fold=True)


_L = r"(?<![A-Za-z0-9])"  # not inside a longer word
_PEM_HEAD = r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
# the word a key that names a secret ends with (secret_keys.key_kind then judges the whole key)
_KEY_WORD = r"(?:pass[_.\-]?(?:word|phrase)|passwd|pwd|secret(?:[_.\-]?(?:access[_.\-]?)?key)?|token|api[_.\-]?key)"
_NOT_AN_EXPRESSION = r"(?![ \t]{0,8}+(?:[+%*\[(]|\.[A-Za-z_]))"  # "..." + x, "...".format(), "..."[0]

# the triggers two rules share (their matches start at one literal)
_ASSIGNED: Final = Trigger(
    [  # a key's last word, then = or : (password; aws_secret_access_key, with a space)
        ("pass", r"[_.\-]?(?:" + _fold("word") + "|" + _fold("phrase") + ")|" + _fold("wd")),
        "pwd",
        ("secret", r"(?:[_.\- ]?(?:" + _fold("access") + r"[_.\- ]?)?" + _fold("key") + ")?"),
        "token",
        ("api", r"[_.\-]?" + _fold("key")),
    ],
    r"[\"']?[ \t]{0,8}[:=]",
)
_SK: Final = Trigger(["sk-"], fold=False)  # openai_api_key, anthropic_api_key

RULES: Final[tuple[Rule, ...]] = (
    Rule(
        "private_key",
        _compile(
            # the body runs to the next "-----" (possessive: it never gives characters back); the
            # END line is optional so that a cut key is redacted too
            _PEM_HEAD + r"(?:[^-]|-(?!----)){0,24000}+(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
        ),
        ("PRIVATE KEY",),
        Trigger(["-----BEGIN"], "[ A-Z0-9]{0,40}PRIVATE KEY", fold=False),
    ),
    Rule(
        "aws_access_key_id",
        _compile(_L + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        Trigger(["AKIA", "ASIA", "ABIA", "ACCA"], "[A-Z0-9]{16}", fold=False),
    ),
    Rule(
        "aws_secret_access_key",
        _compile(
            r"(?i:secret[_\-. ]?(?:access[_\-. ]?)?key)[\"']?[ \t]{0,8}+[:=]{1,2}+>?[ \t]{0,8}+[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        ("secret",),
        _ASSIGNED,
        lower=True,
        group=1,
        near=(_fold("secret") + r"[_\-. ]?(?:" + _fold("access") + r"[_\-. ]?)?" + _fold("key") + r"[\"']?[ \t]*[:=]",),
    ),
    Rule(
        "gcp_api_key",
        _compile(r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
        ("AIza",),
        Trigger(["AIza"], r"[0-9A-Za-z_\-]{35}", fold=False),
    ),
    Rule(
        "google_client_secret",
        _compile(_L + r"GOCSPX-[A-Za-z0-9_\-]{28}(?![A-Za-z0-9_\-])"),
        ("GOCSPX-",),
        Trigger(["GOCSPX-"], fold=False),
    ),
    Rule(
        "google_oauth_token",
        _compile(r"(?<![A-Za-z0-9_\-.])ya29\.[A-Za-z0-9_\-]{30,2048}+"),
        ("ya29.",),
        Trigger(["ya29."], fold=False),
    ),
    Rule(
        "azure_storage_key",
        _compile(r"(?i:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,200}+={0,2}+)"),
        ("accountkey=", "sharedaccesskey="),
        Trigger(["accountkey=", "sharedaccesskey="]),
        lower=True,
        group=1,
    ),
    Rule(
        "github_token",
        _compile(_L + r"(?:gh[pousr]_[A-Za-z0-9]{36,1024}+|github_pat_[A-Za-z0-9_]{22,1024}+)"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        Trigger(["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"], fold=False),
    ),
    Rule(
        "gitlab_token", _compile(_L + r"glpat-[A-Za-z0-9_\-]{20,1024}+"), ("glpat-",), Trigger(["glpat-"], fold=False)
    ),
    Rule(
        "npm_token", _compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,1024}+"), ("npm_",), Trigger(["npm_"], fold=False)
    ),
    Rule(
        "pypi_token",
        _compile(r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{20,4096}+"),
        ("pypi-AgE",),
        Trigger(["pypi-AgE"], fold=False),
    ),
    Rule(
        "anthropic_api_key",
        _compile(r"(?<![A-Za-z0-9_\-])sk-ant-([A-Za-z0-9_\-]{32,1024}+)"),
        ("sk-ant-",),
        _SK,
        check=_random_key,
    ),
    Rule(
        "openai_api_key",
        _compile(r"(?<![A-Za-z0-9_\-])sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-)?([A-Za-z0-9_\-]{40,1024}+)"),
        ("sk-",),
        _SK,
        check=_random_key,
    ),
    Rule(
        "huggingface_token",
        _compile(r"(?<![A-Za-z0-9_])(?:hf|api_org)_([A-Za-z]{34})(?![A-Za-z0-9_])"),
        ("hf_", "api_org_"),
        Trigger(["hf_", "api_org_"], "[A-Za-z]{34}", fold=False),
        check=_mixed_case,
    ),
    Rule(
        "slack_webhook",
        _compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{10,1024}+"),
        ("hooks.slack.com/",),
        Trigger(["https://hooks.slack.com/"], fold=False),
    ),
    Rule(
        "slack_token",
        _compile(_L + r"xox[abeprs]-[A-Za-z0-9\-]{10,1024}+"),
        ("xox",),
        Trigger(["xox"], "[abeprs]-", fold=False),
    ),
    Rule(
        "stripe_key",
        _compile(_L + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,1024}+"),
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        Trigger(["k_live_", "k_test_"], fold=False),
        backs=(1,),
    ),
    Rule(
        "jwt",
        _compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,4096}+\.[A-Za-z0-9_\-]{2,16384}+\.[A-Za-z0-9_\-]{0,4096}+"),
        ("eyJ",),
        Trigger(["eyJ"], r"[A-Za-z0-9_\-]{5}", fold=False),
        check=_jwt_header,
    ),
    Rule(
        "authorization",
        _compile(
            _L + r"(?i:(?:proxy-)?authorization)[\"']?[ \t]{0,8}+[:=][ \t]{0,8}+[\"']?"
            r"((?i:basic|bearer|token|digest|negotiate)[ \t]{1,8}+)?([^\s\"',;]{8,8192}+)"
        ),
        ("authorization",),
        Trigger(["authorization"], r"[\"']?[ \t]{0,8}[:=]"),
        lower=True,
        group=2,
        check=_auth_value,
        backs=(6, 0),
        near=(_fold("authorization") + r"[\"']?[ \t]*[:=]",),
    ),
    Rule(
        "bearer_token",
        _compile(_L + r"(?i:bearer)[ \t]{1,8}+([A-Za-z0-9\-._~+/]{16,8192}+=*+)"),
        ("bearer",),
        Trigger(["bearer"], r"[ \t]{1,8}[A-Za-z0-9\-._~+/]{16}"),
        lower=True,
        group=1,
        check=_not_a_word,
        near=(_fold("bearer") + r"[ \t]+[A-Za-z0-9\-._~+/]{16}",),
    ),
    Rule(
        "url_password",
        _compile(
            # scheme://user:<password>@host: only the password, which runs to the last "@" of the
            # authority (as WHATWG and urllib read "p@ss@host")
            r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,31}+://[^\s/?#@:\"'<>\[\]]{0,256}+:"
            r"((?:[^\s/?#@\"'<>]|@(?=[^\s/?#@\"'<>]{0,256}+@)){1,256}+)@"
        ),
        ("://",),
        Trigger(["://"], fold=False),
        group=1,
        check=_url_password,
        start=_scheme_start,
        near=(r"://[^ \t\n\r\f\v/#@:\"'<>\[\]]*:[^ \t\n\r\f\v/#\"'<>]+@",),
    ),
    Rule(
        "password",
        _compile(
            # KEY=value, "key": "value", key: value, ... (the kind is the key's: secret_keys.key_kind)
            r"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z0-9_.\-]{0,64}?(?i:" + _KEY_WORD + r"))[\"']?[ \t]{0,8}+"
            r"(?P<op>:=|=>|=(?!=)|:(?![:/]))[ \t]{0,8}+"
            r"(?:\"(?P<dq>[^\"\\\s]{1,512}+)\""
            + _NOT_AN_EXPRESSION
            + r"|'(?P<sq>[^'\\\s]{1,512}+)'"
            + _NOT_AN_EXPRESSION
            + r"|(?P<bare>[^\s\"'`,;&<>(){}\[\]\\]{1,512}+)(?![(\[{<]))"
        ),
        ("password",),
        _ASSIGNED,
        lower=True,
        pick=_assignment,
        start=_key_start,
        near=("(?i)" + _KEY_WORD + r"[\"']?[ \t]*[:=]",),
    ),
)

KINDS: Final[dict[str, str]] = {
    "private_key": "a PEM private key block (RSA, EC, DSA, PKCS#8, encrypted, OpenSSH, PGP), "
    "BEGIN line to END line (or to the end of the text when cut)",
    "aws_access_key_id": "an AWS access key id: AKIA, ASIA, ABIA or ACCA and 16 capitals or digits",
    "aws_secret_access_key": "40 base64 characters labelled as a secret (access) key "
    '(aws_secret_access_key=..., "SecretAccessKey": "..."): the value only',
    "gcp_api_key": "a Google API key: AIza and 35 characters",
    "google_client_secret": "a Google OAuth client secret: GOCSPX- and 28 characters",
    "google_oauth_token": "a Google OAuth access token: ya29. and 30+ characters",
    "azure_storage_key": "the value of AccountKey= or SharedAccessKey= (Azure connection strings)",
    "github_token": "a GitHub token: ghp_, gho_, ghu_, ghs_, ghr_ and 36+ characters, or github_pat_",
    "gitlab_token": "a GitLab personal access token: glpat- and 20+ characters",
    "npm_token": "an npm access token: npm_ and 36+ letters and digits",
    "pypi_token": "a PyPI (or TestPyPI) API token, pypi-AgEIcHlwaS5vcmc and more",
    "anthropic_api_key": "an Anthropic API key: sk-ant- and 32+ random characters",
    "openai_api_key": "an OpenAI API key: sk-, sk-proj-, sk-svcacct-, sk-admin- and 40+ random characters",
    "huggingface_token": "a Hugging Face token: hf_ (or api_org_) and 34 letters of both cases",
    "slack_webhook": "a Slack webhook URL (https://hooks.slack.com/services/...)",
    "slack_token": "a Slack token: xoxa-, xoxb-, xoxe-, xoxp-, xoxr-, xoxs-",
    "stripe_key": "a Stripe secret or restricted key: sk_live_, sk_test_, rk_live_, rk_test_",
    "jwt": 'a JSON Web Token: three base64url parts whose header is a JSON object with "alg"',
    "authorization": "the credentials of an Authorization (or Proxy-Authorization) header or "
    "member, after its scheme (Basic, Bearer, ...)",
    "bearer_token": "the token after Bearer (16+ characters, not a word of letters only)",
    "url_password": "the password of a URL scheme://user:<password>@host (user and host are kept)",
    "password": 'a value assigned to a key that names a password (DB_PASSWORD=..., "password": "...")',
    "secret": "a value assigned to a key that names a secret (CLIENT_SECRET=..., secret_key: ...)",
    "token": 'a value assigned to a key that names a token (GITHUB_TOKEN=..., "access_token": "...")',
    "api_key": 'a value assigned to a key that names an API key (API_KEY=..., "x-api-key": "...")',
}
"""kind -> what it covers, for every kind :func:`find_secrets` finds (docs/inspect.md)."""

# one set per rule, and the default-ignorable characters (then the secrets are looked for in the
# text without them: docs/inspect.md, "Normalization")
PREFILTER: Final = Prefilter(
    [*(rule.near or [literal(hint, rule.lower) for hint in rule.hints] for rule in RULES), [ignorable_class()]]
)
IGNORABLE: Final = len(RULES)  # the index of the ignorable set in PREFILTER.which
# each rule's trigger, numbered in the shared table of triggers (assay.inspect.places)
TRIGGERS: Final[tuple[int, ...]] = tuple(shared_numbers(rule.trigger for rule in RULES))


def matches(rule: Rule, text: str, hits: list[int]) -> Iterator[re.Match[str]]:
    """What ``rule.pattern.finditer(text)`` yields, found by trying the pattern only where the
    rule's trigger matches (``hits``: the positions in ``text``, increasing; see
    :class:`Rule`): the same leftmost, non-overlapping matches, since every position where the
    pattern matches is among those tried, in increasing order, from the end of the last match
    on."""
    match, backs, start_of = rule.pattern.match, rule.backs, rule.start
    at = 0  # where finditer would go on searching
    for pos in hits:
        if pos < at:
            continue
        found = None
        if start_of is not None:
            start = start_of(text, pos)
            if start >= at:
                found = match(text, start)
        elif backs is _HERE:
            found = match(text, pos)
        else:
            for back in backs:
                if pos - back >= at and (found := match(text, pos - back)) is not None:
                    break
        if found is not None:
            yield found
            at = found.end()
