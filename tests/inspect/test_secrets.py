"""The secret detector (docs/inspect.md, "Secrets"): every documented shape is redacted wherever
it sits in a text; ordinary strings (hashes, UUIDs, base64, paths, prose, plain URLs) are not;
every rule runs in linear time; redact_value never raises on content."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect import secrets
from assay.inspect.secrets import (
    KINDS,
    MAX_DEPTH,
    MAX_SECRET_CHARS,
    Finding,
    find_secrets,
    key_kind,
    redact_text,
    redact_value,
)

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def chars(alphabet: str, n: int, m: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=n, max_size=n if m is None else m)


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def pem(kind: str, body: str) -> str:
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


# kind -> a strategy of (whole text of the secret shape, the part that must disappear)
SHAPES: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": st.builds(
        lambda kind, lines: (lambda t: (t, t))(pem(kind, "\n".join(lines))),
        st.sampled_from(["", "RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED "]),
        st.lists(chars(B64 + "=", 1, 64), min_size=1, max_size=8),
    ),
    "aws_access_key_id": st.builds(lambda p, s: (p + s, p + s), st.sampled_from(["AKIA", "ASIA"]), chars(UPPER_DIGITS, 16)),
    "aws_secret_access_key": st.builds(
        lambda label, sep, v: (f"{label}{sep}{v}", v),
        st.sampled_from(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", '"SecretAccessKey"', "secret_key"]),
        st.sampled_from(["=", " = ", ": ", ':"', "="]),
        chars(B64, 40),
    ),
    "gcp_api_key": st.builds(lambda s: ("AIza" + s, "AIza" + s), chars(URLSAFE, 35)),
    "azure_storage_key": st.builds(
        lambda k: (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={k}==;EndpointSuffix=core.windows.net", k),
        chars(B64, 86),
    ),
    "github_token": st.one_of(
        st.builds(lambda p, s: (p + s, p + s), st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), chars(ALNUM, 36)),
        st.builds(lambda s: ("github_pat_" + s, "github_pat_" + s), chars(ALNUM + "_", 82)),
    ),
    "gitlab_token": st.builds(lambda s: ("glpat-" + s, "glpat-" + s), chars(URLSAFE, 20)),
    "npm_token": st.builds(lambda s: ("npm_" + s, "npm_" + s), chars(ALNUM, 36)),
    "pypi_token": st.builds(lambda s: ("pypi-AgEIcHlwaS5vcmc" + s, "pypi-AgEIcHlwaS5vcmc" + s), chars(URLSAFE, 50, 200)),
    "slack_token": st.builds(lambda c, s: (f"xox{c}-{s}", f"xox{c}-{s}"), st.sampled_from("abprs"), chars(ALNUM + "-", 10, 60)),
    "slack_webhook": st.builds(
        lambda a, b, c: (lambda u: (u, u))(f"https://hooks.slack.com/services/T{a}/B{b}/{c}"),
        chars(UPPER_DIGITS, 8), chars(UPPER_DIGITS, 8), chars(ALNUM, 24),
    ),
    "stripe_key": st.builds(lambda p, s: (p + s, p + s), st.sampled_from(["sk_live_", "rk_live_", "sk_test_"]), chars(ALNUM, 24, 99)),
    "jwt": st.builds(
        lambda alg, sub, sig: (lambda t: (t, t))(f"{b64url({'alg': alg, 'typ': 'JWT'})}.{b64url({'sub': sub})}.{sig}"),
        st.sampled_from(["HS256", "RS256", "none"]), st.text(max_size=20), chars(URLSAFE, 0, 86),
    ),
    "bearer_token": st.builds(lambda t: (f"Bearer {t}", t), chars(ALNUM + "-._~+/", 16, 80).filter(lambda t: not t.isalpha())),
    "authorization": st.builds(
        lambda scheme, t: (f"Authorization: {scheme}{t}", t),
        st.sampled_from(["Basic ", "Token ", ""]), chars(B64 + "=", 8, 60).filter(lambda t: not t.isalpha()),
    ),
    "url_password": st.builds(
        lambda scheme, user, pw, host: (f"{scheme}://{user}:P!{pw}@{host}/db", "P!" + pw),
        st.sampled_from(["postgres", "https", "redis", "mongodb+srv", "amqp"]),
        chars(ALNUM + "._-", 0, 12), chars(ALNUM + "!$%&*()=-._~:", 1, 30), st.sampled_from(["db.example.com", "localhost:5432"]),
    ),
}

# text around a secret: anything that cannot glue itself onto the token
FILLER = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40).map(lambda s: s + " ")


def test_every_kind_has_a_shape_and_is_documented() -> None:
    assert set(SHAPES) == set(KINDS) == {rule.kind for rule in secrets._RULES}


@pytest.mark.parametrize("kind", sorted(SHAPES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_each_shape_is_redacted_anywhere(kind: str, data: st.DataObject) -> None:
    text, secret = data.draw(SHAPES[kind])
    before = data.draw(FILLER)
    after = data.draw(FILLER.map(lambda s: " " + s))
    out, kinds = redact_text(before + text + after)
    assert kinds, (kind, text)
    assert out.startswith(before) and out.endswith(after)
    assert secret not in out[len(before): len(out) - len(after)]
    assert all(k in KINDS for k in kinds)
    assert [s.kind for s in find_secrets(text)] == [kind]  # alone, it is found as its own kind


@pytest.mark.parametrize("kind", sorted(SHAPES))
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_secret_in_a_json_value_is_redacted(kind: str, data: st.DataObject) -> None:
    text, secret = data.draw(SHAPES[kind])
    value = {"command": ["run", {"env": f"X={text}"}], "n": 1}
    out, findings = redact_value(value)
    assert secret not in json.dumps(out)
    assert findings and findings[0].path == "/command/1/env"
    assert value["command"][1] == {"env": f"X={text}"}  # the input is not changed


ORDINARY = [
    hashlib.sha1(b"x").hexdigest(),  # a git SHA
    hashlib.sha256(b"x").hexdigest(),
    "sha256:" + hashlib.sha256(b"y").hexdigest(),
    str(uuid.UUID(int=0x123E4567E89B12D3A456426614174000)),
    "/home/you/projects/app/src/secret_handling/token_store.py",
    "C:\\Users\\you\\AppData\\Roaming\\npm\\node_modules",
    "https://example.com/search?q=tokens&page=2",
    "https://user@example.com/repo.git",
    "ssh://git@github.com:22/org/repo.git",
    "http://localhost:8080/path",
    "npm install --save-dev typescript; npm_config_registry is set by npm",
    "pypi upload: twine uploads to pypi-test first",
    "The bearer of this letter will explain. Authorization: pending review.",
    "Use a Bearer token in the Authorization header; store the secret key in a vault.",
    "sk_ and rk_ prefixes; ghp is a word; xox is not a token",
    "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 4).decode(),
    base64.b64encode(hashlib.sha512(b"z").digest() * 3).decode(),
    "eyJ is how a JSON object starts in base64",
    b64url({"sub": "x"}) + "." + b64url({"no": "alg"}) + ".sig",  # looks like a JWT, header has no alg
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_strings_are_left_alone(text: str) -> None:
    assert redact_text(text) == (text, [])


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.text(alphabet="0123456789abcdef", min_size=40, max_size=64),
    st.uuids().map(str),
    st.binary(min_size=1, max_size=300).map(lambda b: base64.b64encode(b).decode()),
    st.lists(st.text(alphabet=ALNUM + "._-", min_size=1, max_size=12), min_size=1, max_size=6).map(lambda p: "/" + "/".join(p)),
    st.lists(st.sampled_from(["the", "token", "secret", "npm", "pypi", "key", "password", "bearer", "of", "a", "is"]),
             max_size=20).map(" ".join),
    st.builds(lambda h, p: f"https://{h}.example.org/{p}?a=1", st.text(alphabet="abc", min_size=1, max_size=8),
              st.text(alphabet=ALNUM, max_size=20)),
))
def test_generated_ordinary_strings_are_left_alone(text: str) -> None:
    assert find_secrets(text) == []


ADVERSARIAL = {
    "pem_heads": "-----BEGIN PRIVATE KEY-----" * 40_000,
    "pem_dashes": "-----BEGIN PRIVATE KEY-----" + "----x" * 200_000,
    "schemes": "a://" * 250_000,
    "userinfo": ("ab://" + "c" * 250 + ":") * 4_000,
    "password": "a://b:" + "c" * 1_000_000,
    "bearers": "bearer " * 150_000,
    "auth": "Authorization: Basic " * 50_000,
    "jwt_heads": "eyJ" * 330_000,
    "jwt_parts": "eyJaaaaa." * 110_000,
    "labels": "secret_key=" * 90_000,
    "label_long": "secret_key=" + "A" * 1_000_000,
    "prefixes": "ghp_github_pat_glpat-npm_xoxb-sk_live_AKIAAIza" * 20_000,
    "azure": "AccountKey=" + "A" * 1_000_000,
    "dots": "." * 1_000_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_rules_run_in_linear_time(name: str) -> None:
    text = ADVERSARIAL[name]
    start = time.perf_counter()
    find_secrets(text)
    assert time.perf_counter() - start < 3.0  # ~0.2 s on the loaded dev machine; backtracking takes minutes


def test_no_match_is_longer_than_the_documented_bound() -> None:
    longest = [
        pem("RSA ", "A" * 100_000), "ghp_" + "a" * 100_000, "github_pat_" + "a" * 100_000,
        "glpat-" + "a" * 100_000, "npm_" + "a" * 100_000, "pypi-AgEIcHlwaS5vcmc" + "a" * 100_000,
        "xoxb-" + "a" * 100_000, "sk_live_" + "a" * 100_000, "https://hooks.slack.com/services/" + "a" * 100_000,
        b64url({"alg": "x"}) + "a" * 4000 + "." + "b" * 100_000 + "." + "c" * 100_000,
        "Bearer 1" + "a" * 100_000, "Authorization: Basic " + "a" * 100_000, "AccountKey=" + "a" * 100_000,
        "a" * 40 + "://" + "u" * 300 + ":" + "p" * 300 + "@",
    ]
    for text in longest:
        for secret in find_secrets(text):
            assert secret.end - secret.start <= MAX_SECRET_CHARS


def test_overlapping_matches_merge_into_one_span() -> None:
    token = "ghp_" + "a" * 36
    out, kinds = redact_text(f"Authorization: Bearer {token}")
    assert out == "Authorization: Bearer [REDACTED:github_token]" and kinds == ["github_token"]
    text = "https://u:" + token + "@host"
    assert redact_text(text)[0] == "https://u:[REDACTED:github_token]@host"


def test_key_names() -> None:
    for key, kind in [("password", "password"), ("DB_PASSWORD", "password"), ("passwd", "password"),
                      ("userPassword", "password"), ("client_secret", "secret"), ("token", "token"),
                      ("access-token", "token"), ("api_key", "api_key"), ("X-API-Key", "api_key"),
                      ("Authorization", "authorization"), ("private_key", "private_key"), ("Cookie", "cookie")]:
        assert key_kind(key) == kind, key
    for key in ["path", "max_tokens", "tokens", "secretary", "keyboard", "passage", "author", "content"]:
        assert key_kind(key) is None, key


def test_a_value_under_a_secret_key_is_replaced_whole() -> None:
    out, findings = redact_value({"path": "/a", "password": {"nested": [1, 2]}, "token": 12345, "secret": None,
                                  "api_key": "", "headers": {"Authorization": "Basic dXNlcjpwYXNz"}})
    assert out == {"path": "/a", "password": "[REDACTED:password]", "token": "[REDACTED:token]", "secret": None,
                   "api_key": "", "headers": {"Authorization": "[REDACTED:authorization]"}}
    assert findings == [Finding("password", "/password"), Finding("token", "/token"),
                        Finding("authorization", "/headers/Authorization")]


def test_redact_value_never_raises_on_content() -> None:
    deep: object = "ghp_" + "a" * 36
    for _ in range(10_000):
        deep = [deep]
    out, findings = redact_value({"x": deep})
    assert findings == [Finding("depth_limit", "/x" + "/0" * (MAX_DEPTH - 1))]
    assert "ghp_" not in repr(out)
    surrogate = "\ud83d ghp_" + "b" * 36 + " \udfff"
    out2, findings2 = redact_value({"a/b~c": surrogate, "n": [1.5, True, None, 10**30]})
    assert out2 == {"a/b~c": "\ud83d [REDACTED:github_token] \udfff", "n": [1.5, True, None, 10**30]}
    assert findings2 == [Finding("github_token", "/a~1b~0c")]
    huge = "x" * 5_000_000 + " AKIA" + "A" * 16
    out3, _ = redact_value(huge)
    assert out3.endswith("[REDACTED:aws_access_key_id]")


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
))
def test_redact_value_takes_any_json(value: object) -> None:
    redact_value(value)


def test_the_patterns_have_only_bounded_repetitions() -> None:
    """A reading of the rule texts: with character classes taken out, no ``*`` and no greedy
    ``+`` (unbounded) is left, only bounded ``{m,n}`` ones; a ``+`` after one makes it
    possessive (it never gives characters back). The padding ``=*+`` is possessive too."""
    for rule in secrets._RULES:
        text = re.sub(r"\\.", "E", rule.pattern.pattern.replace("=*+", ""))
        text = re.sub(r"\[[^\]]*\]", "C", text)
        assert "*" not in text, rule.kind
        assert not re.search(r"(?<!\})\+", text), rule.kind


def test_the_docs_table_lists_every_kind() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "inspect.md").read_text(encoding="utf-8")
    section = page.split("### Kinds found in text", 1)[1].split("###", 1)[0]
    assert re.findall(r"^\| `([a-z_]+)` \|", section, re.M) == list(KINDS)


# -- Speed (docs/inspect.md, "Speed"): find_secrets gives exactly what the plain implementation
# gave, which ran every rule's finditer over the whole text (a copy of it, the oracle, follows).

def _old_jwt_header(match: re.Match[str]) -> bool:
    head = match.group(0).split(".", 1)[0]
    try:
        value = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return False
    return isinstance(value, dict) and "alg" in value


_OL = r"(?<![A-Za-z0-9])"
_OLD_RULES: list[tuple[str, re.Pattern[str], tuple[str, ...], bool, int, Callable[[re.Match[str]], bool] | None]] = [
    (kind, re.compile(pattern, re.ASCII), hints, lower, group, check)
    for kind, pattern, hints, lower, group, check in [
        ("private_key", r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[^-]|-(?!----)){0,24000}+"
         r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?", ("PRIVATE KEY",), False, 0, None),
        ("aws_access_key_id", _OL + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
         ("AKIA", "ASIA", "ABIA", "ACCA"), False, 0, None),
        ("aws_secret_access_key", r"(?i:secret[_\-. ]?(?:access[_\-. ]?)?key)[\"']?[ \t]{0,8}+[:=]{1,2}+>?[ \t]{0,8}+"
         r"[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])", ("secret",), True, 1, None),
        ("gcp_api_key", r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", ("AIza",), False, 0, None),
        ("azure_storage_key", r"(?i:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,200}+={0,2}+)",
         ("accountkey=", "sharedaccesskey="), True, 1, None),
        ("github_token", _OL + r"(?:gh[pousr]_[A-Za-z0-9]{36,1024}+|github_pat_[A-Za-z0-9_]{22,1024}+)",
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), False, 0, None),
        ("gitlab_token", _OL + r"glpat-[A-Za-z0-9_\-]{20,1024}+", ("glpat-",), False, 0, None),
        ("npm_token", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,1024}+", ("npm_",), False, 0, None),
        ("pypi_token", r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{20,4096}+", ("pypi-AgE",), False, 0, None),
        ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{10,1024}+",
         ("hooks.slack.com/",), False, 0, None),
        ("slack_token", _OL + r"xox[abeprs]-[A-Za-z0-9\-]{10,1024}+", ("xox",), False, 0, None),
        ("stripe_key", _OL + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,1024}+",
         ("sk_live_", "sk_test_", "rk_live_", "rk_test_"), False, 0, None),
        ("jwt", r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,4096}+\.[A-Za-z0-9_\-]{2,16384}+\.[A-Za-z0-9_\-]{0,4096}+",
         ("eyJ",), False, 0, _old_jwt_header),
        ("authorization", _OL + r"(?i:(?:proxy-)?authorization)[\"']?[ \t]{0,8}+[:=][ \t]{0,8}+[\"']?"
         r"((?i:basic|bearer|token|digest|negotiate)[ \t]{1,8}+)?([^\s\"',;]{8,8192}+)", ("authorization",), True, 2,
         lambda m: m.group(1) is not None or not m.group(2).isalpha()),
        ("bearer_token", _OL + r"(?i:bearer)[ \t]{1,8}+([A-Za-z0-9\-._~+/]{16,8192}+=*+)", ("bearer",), True, 1,
         lambda m: not m.group(1).isalpha()),
        ("url_password", r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,31}+://[^\s/?#@:\"'<>\[\]]{0,256}+:"
         r"([^\s/?#@\"'<>]{1,256}+)@", ("://",), False, 1, None),
    ]
]


def old_find_secrets(text: str) -> list[tuple[str, int, int]]:
    """find_secrets as it was before the literal prefilter and the finders (the oracle)."""
    if len(text) < 8:
        return []
    lowered = text.lower()
    found = []
    for order, (kind, pattern, hints, lower, group, check) in enumerate(_OLD_RULES):
        if not any(hint in (lowered if lower else text) for hint in hints):
            continue
        for match in pattern.finditer(text):
            if check is None or check(match):
                start, end = match.span(group)
                if end > start and not text.startswith("[REDACTED:", start):  # markers are no secrets
                    found.append((start, -end, order, kind))
    out: list[tuple[str, int, int]] = []
    for start, neg_end, _order, kind in sorted(found):
        if out and start < out[-1][2]:
            if -neg_end > out[-1][2]:
                out[-1] = (out[-1][0], out[-1][1], -neg_end)
            continue
        out.append((kind, start, -neg_end))
    return out


def test_a_redacted_text_has_no_finding() -> None:
    for text in ("Authorization: Basic [REDACTED:authorization]", "postgres://u:[REDACTED:url_password]@db/x",
                 "aws_secret_access_key=[REDACTED:aws_secret_access_key]"):
        assert find_secrets(text) == []
    redacted, kinds = redact_text("Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ== and https://u:hunter22@db/x")
    assert kinds and find_secrets(redacted) == []


def test_the_oracle_is_the_rule_table() -> None:
    assert [(k, p.pattern, g) for k, p, _h, _l, g, _c in _OLD_RULES] == [
        (r.kind, r.pattern.pattern, r.group) for r in secrets._RULES]


# what glues onto a secret or cuts it: its prefixes and labels, in any case, separators, other
# scripts, lone surrogates
_PIECES = [
    "AKIA", "ASIA", "ABIA", "ACCA", "AIza", "secret", "SECRET_access-KEY", "secret.key", "AccountKey=",
    "SharedAccessKey=", "ghp_", "gho_", "github_pat_", "glpat-", "npm_", "pypi-AgEIcHlwaS5vcmc",
    "pypi-AgENdGVzdC5weXBpLm9yZw", "https://hooks.slack.com/services/", "xox", "xoxb-", "xoxox", "sk_live_",
    "rk_test_", "k_live_", "eyJ", "eyJhbGciOiJIUzI1NiJ9.", "Authorization", "proxy-", "Proxy-Authorization",
    "bearer", "Bearer ", "Basic ", "://", "a://", "a://b:", "https://", "@", "-----BEGIN PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----", "-----", "=", "==", ":", ": ", "\"", "'", " ", "\t", "\n", ".", "/", "+",
    "_", "-", "?", "#", "<", ">", ";", ",", "é", "\u212a", "\u0130", "\ud800", "\U0001f600", "\u00a0",
    "\u2003", "\u3000", "\x85", "//", "u:p@", ":pw@h", "?q=1", "[::1]",
]
_NOISE = st.one_of(
    st.sampled_from(_PIECES),
    st.sampled_from(_PIECES).map(str.swapcase),
    chars(ALNUM, 1, 48),
    chars(B64 + "=-_.", 1, 48),
    st.text(max_size=6),
    st.text(alphabet="aZ1:/@?#.-_=+ \t\u00a0\u2003é'\"<>[]", min_size=1, max_size=16),  # the innards of URLs, labels
    st.builds(lambda scheme, user, pw: f"{scheme}://{user}:{pw}@", st.sampled_from(["a", "https", "x" * 32, "é"]),
              *[st.text(alphabet="aZ1_.-~!$\u00a0\u2003é\U0001f600?#[:'\" ", max_size=8)] * 2),
)


@st.composite
def _glued(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 2)):
            text, _secret = draw(SHAPES[draw(st.sampled_from(sorted(SHAPES)))])
            if not draw(st.integers(0, 3)):  # a fragment of it
                i = draw(st.integers(0, len(text)))
                j = draw(st.integers(i, len(text)))
                text = text[i:j]
            parts.append(text)
        else:
            parts.append(draw(_NOISE))
    return "".join(parts)


@settings(max_examples=1500, deadline=None)
@given(_glued())
def test_find_secrets_is_the_plain_implementation(text: str) -> None:
    assert [tuple(s) for s in find_secrets(text)] == old_find_secrets(text)


# every alternative of every rule's start, whole and glued to a word character before it
_STARTS = [
    *(p + "A" * 16 for p in ("AKIA", "ASIA", "ABIA", "ACCA")), *(f"gh{c}_" + "a" * 36 for c in "pousr"),
    "github_pat_" + "a" * 22, "glpat-" + "a" * 20, "npm_" + "a" * 36, *(f"xox{c}-" + "a" * 10 for c in "abeprs"),
    *(p + "a" * 10 for p in ("sk_live_", "sk_test_", "rk_live_", "rk_test_")),
    *(p + "A" * 20 for p in ("AccountKey=", "accountKEY=", "SharedAccessKey=", "SHAREDACCESSKEY=")),
    *(p + ": Basic " + "a1" * 4 for p in ("authorization", "AUTHORIZATION", "Proxy-Authorization", "PROXY-authorization")),
    "bEaReR " + "a1" * 8, "Bearer\t\t" + "a1" * 8, "SeCrEt_KeY=" + "A" * 40, "secret key: " + "A" * 40,
    "Secret Access Key =\t'" + "A" * 40, "secret-access.key:=>" + "A" * 40, "'SECRETKEY'" + "\t" * 8 + ":" + "A" * 40,
    '"Authorization": "Basic ' + "a1" * 4, "'authorization'\t=\t'" + "a1" * 4, "eyJhbGciOiJub25lIn0.e30.",
    "pypi-AgENdGVzdC5weXBpLm9yZw" + "a" * 20, "https://hooks.slack.com/triggers/" + "a" * 10,
]


@pytest.mark.parametrize("text", [
    *ADVERSARIAL.values(), *_STARTS, *("x" + t for t in _STARTS), *("-" + t for t in _STARTS),
    "xoxoxb-" + "a" * 20, "AKIAKIA" + "A" * 20, "e" + "a" * 31 + "://u:p@h", "e" + "a" * 32 + "://u:p@h",
    "a://b:c@" * 3 + "d", "xproxy-authorization: " + "a1" * 8, "Proxy-Authorization: Basic " + "a1" * 8,
    "sk_live_k_live_" + "a" * 20, "a://u\u00a0x:p\u2003w@h", "a://u:p\u00e9?@h", "AccountKey=SharedAccessKey=" + "A" * 30,
])
def test_find_secrets_is_the_plain_implementation_on_edges(text: str) -> None:
    assert [tuple(s) for s in find_secrets(text)] == old_find_secrets(text)


def test_an_environment_reference_in_an_authorization_header_is_no_secret() -> None:
    """A config's `Authorization: Bearer ${TOKEN}` (what `wrap --header` and protect write:
    docs/remote.md, "Options") names a variable; the token itself is still found."""
    for text in ("Authorization: Bearer ${GITHUB_TOKEN}", "authorization=$API_TOKEN", "Authorization: %TOKEN%",
                 '"--header-env", "Authorization=ASSAY_HEADER_1"', "`Authorization=ASSAY_HEADER_1`."):
        assert find_secrets(text) == [], text
    token = "ab12" * 6
    assert [s.kind for s in find_secrets(f"Authorization: Bearer {token}")] == ["authorization"]
    assert [s.kind for s in find_secrets("Authorization: Bearer ABCD1234EFGH5678")] == ["authorization"]
