"""Secrets named by their key (docs/inspect.md, "Secrets", "Keys that name a secret"): the one
table of key names, read by the text rule of assignments (``DB_PASSWORD=...``, ``"api_key":
"..."``: :mod:`assay.inspect.secret_rules`) and by :func:`~assay.inspect.secrets.redact_value`
(a JSON member under such a key, replaced whole), so that inspection and ``--log-arguments``
redaction judge a key alike.

Sans-IO and stateless; the standard library only.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ASSIGNED_KINDS",
    "KEY_KINDS",
    "MEMBER_NAME",
    "SECRET_KEYS",
    "assigned_value",
    "key_kind",
    "member_secret",
    "placeholder",
]

# A key is compared lowercased, with "-", "_", "." and spaces taken out; it names a secret when it
# is one of the exact names, or ends in one of the suffixes, and is none of the handles below.
_KEY_EXACT: Final[dict[str, str]] = {
    "password": "password",
    "passwd": "password",
    "pwd": "password",
    "passphrase": "password",
    "secret": "secret",
    "token": "token",
    "apikey": "api_key",
    "authorization": "authorization",
    "proxyauthorization": "authorization",
    "cookie": "cookie",
    "setcookie": "cookie",
    "privatekey": "private_key",
}
_KEY_SUFFIXES: Final[tuple[tuple[str, str], ...]] = (
    ("password", "password"),
    ("passphrase", "password"),
    ("secret", "secret"),
    ("secretkey", "secret"),
    ("secretaccesskey", "secret"),
    ("token", "token"),
    ("apikey", "api_key"),
    ("privatekey", "private_key"),
)
# tokens that are handles, not credentials: a page of results, a sync position (a tool that pages
# needs them back as they are)
_HANDLES: Final = ("pagetoken", "nexttoken", "continuationtoken", "synctoken", "cursortoken", "resumetoken")
SECRET_KEYS: Final[dict[str, str]] = dict(_KEY_EXACT)
"""Exact secret key names (normalized) -> kind; suffixes in docs/inspect.md."""
KEY_KINDS: Final = ("password", "secret", "token", "api_key", "authorization", "cookie", "private_key")
ASSIGNED_KINDS: Final = frozenset(("password", "secret", "token", "api_key"))
"""The key kinds whose assignments the text rule finds (the others have rules of their own)."""
_KEY_STRIP: Final = str.maketrans("", "", "-_. ")


def _member_name() -> str:
    words = sorted({word for word, kind in (*_KEY_EXACT.items(), *_KEY_SUFFIXES) if kind in ASSIGNED_KINDS})
    gap = "[-_. ]*"  # what key_kind takes out, anywhere in the key
    return "(?i:" + "|".join(gap.join(word) for word in words) + ")" + gap + '"[ \\t\\r\\n]*:'


MEMBER_NAME: Final = _member_name()
"""A regex (Python's and RE2's) that matches where a JSON text, without escapes, has a member whose
name :func:`member_secret` can take for a secret's: the name's last word, its closing quote, JSON
white space and the colon (assay.inspect.linegate: a line with one is read whole)."""


def key_kind(key: str) -> str | None:
    """The kind a value under ``key`` is redacted as, whatever it holds, or None."""
    if len(key) > 128:
        return None
    norm = key.lower().translate(_KEY_STRIP)
    kind = _KEY_EXACT.get(norm)
    if kind is not None:
        return kind
    if norm.endswith(_HANDLES):
        return None
    for suffix, kind in _KEY_SUFFIXES:
        if norm.endswith(suffix):
            return kind
    return None


# what a configuration holds in the place of a value: a reference to a variable (${TOKEN},
# $TOKEN, %TOKEN%, {{ secrets.TOKEN }}, a name such as API_TOKEN), a placeholder (<token>,
# ****, xxxx, ...), a redaction marker
_PLACEHOLDER: Final = re.compile(
    r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%"
    r"|[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)++",
    re.ASCII,
)
_NOT_A_VALUE: Final = re.compile(
    r"[$<{\[]|%[A-Za-z_]|[*xX.\u2022\u2026#_\- ]++$"  # a reference, a placeholder, a mask
    r"|(?:/|~/|\.\.?/|[A-Za-z]:\\)"  # a path (PWD=/home/you is the working directory)
    r"|[A-Za-z][A-Za-z0-9+.\-]*+://"  # a URL (its password, if any, is the url_password rule's)
    r"|(?i:urn):[A-Za-z0-9][A-Za-z0-9\-]{0,31}+:",  # a URN names a kind of thing (a token type), it holds none
    re.ASCII,
)
_CODE_CALL: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*+\(", re.ASCII)  # token = read_token(path): code
_WORDLIKE: Final = re.compile(r"[A-Za-z_.\- ]++", re.ASCII)  # letters, and what joins words into a name
_ELIDED: Final = re.compile(r"\.\.\.|\u2026|xxxx|XXXX|\*\*\*", re.ASCII)  # sk-..., hf_xxxx, ab***
# a value of letters that says what it stands for: the placeholder of an example file
_PLACEHOLDER_WORDS: Final = re.compile(
    r"pass|pwd|secret|token|apikey|example|sample|change|placeholder|dummy|your|replace|insert|here|todo"
    r"|none|null|undefined|empty|default|demo|fake|redacted",
)
_MIN_VALUE: Final = 6


def placeholder(value: str) -> bool:
    """Whether ``value`` (a password, a token) is a placeholder: elided (``sk-...``,
    ``hf_xxxx``), or letters that name what they stand for (``password``, ``your_api_key_here``,
    ``changeme``, ``example``)."""
    if _ELIDED.search(value):
        return True
    return (
        _WORDLIKE.fullmatch(value) is not None
        and _PLACEHOLDER_WORDS.search(value.lower().translate(_KEY_STRIP)) is not None
    )


def assigned_value(value: str, literal: bool) -> bool:
    """Whether ``value``, assigned to a key that names a secret, is one: at least 6 characters,
    not a reference to a variable, a placeholder, a path or a URL; and, unless ``literal`` (a
    ``NAME=value`` line of an env file, a connection string, a URL query: where a value is what it
    says), not a word or name of letters only (``None``, ``str``, ``process.env.TOKEN``,
    ``my-secret-name``: in code and YAML those are names and types)."""
    if len(value) < _MIN_VALUE or _NOT_A_VALUE.match(value) or _PLACEHOLDER.fullmatch(value) or placeholder(value):
        return False
    return literal or not (_WORDLIKE.fullmatch(value) or _CODE_CALL.match(value))


def member_secret(key: str, value: object) -> str | None:
    """The kind of a JSON member's value under ``key`` when the key names a secret and the value
    is a string that is one (:func:`assigned_value`; a JSON string says what it is, as a
    ``NAME=value`` line does), or None: the text rule of assignments applied to a parsed member
    (``{"password": "..."}`` in a tool's ``structuredContent``)."""
    if value.__class__ is not str:
        return None
    kind = key_kind(key)
    if kind not in ASSIGNED_KINDS:
        return None
    return kind if assigned_value(value, literal=True) else None
