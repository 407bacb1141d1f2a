"""The secret detector (docs/inspect.md, "Secrets"): every documented shape is redacted wherever
it sits in a text; ordinary strings (hashes, UUIDs, base64, paths, prose, plain URLs) are not;
every rule runs in linear time; redact_value never raises on content."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect import secrets
from assay.inspect.chartable import IGNORABLE
from assay.inspect.secret_keys import placeholder
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


# a value assigned to a key that names a secret: it has a digit, so it is one wherever it stands
VALUES = chars(ALNUM + "!#%^*+=~-_.:@", 3, 40).map(lambda s: "v4L" + s).filter(lambda v: not placeholder(v))
ASSIGNMENTS = {
    "password": [
        "DB_PASSWORD={v}",
        '"password": "{v}",',
        "password: {v}",
        "export PGPASSWORD='{v}'\n",
        "Password={v};",
        "pass_phrase := {v}",
        "'passwd' => '{v}',",
        "?user=app&password={v}&sslmode=require",
    ],
    "secret": ["CLIENT_SECRET={v}", '"client_secret": "{v}",', "secret_key = '{v}'\n", "django.secret: {v}"],
    "token": ["GITHUB_TOKEN={v}", '{{"access_token": "{v}"}}', "//registry.npmjs.org/:_authToken={v}", "token: {v}"],
    "api_key": ["API_KEY={v}", '"x-api-key": "{v}",', "apiKey: '{v}'\n", "OPENAI_API_KEY={v}"],
}

# kind -> a strategy of (whole text of the secret shape, the part that must disappear)
SHAPES: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": st.builds(
        lambda kind, lines: (lambda t: (t, t))(pem(kind, "\n".join(lines))),
        st.sampled_from(["", "RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED "]),
        st.lists(chars(B64 + "=", 1, 64), min_size=1, max_size=8),
    ),
    "aws_access_key_id": st.builds(
        lambda p, s: (p + s, p + s), st.sampled_from(["AKIA", "ASIA"]), chars(UPPER_DIGITS, 16)
    ),
    "aws_secret_access_key": st.builds(
        lambda label, sep, v: (f"{label}{sep}{v}", v),
        st.sampled_from(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", '"SecretAccessKey"', "secret_key"]),
        st.sampled_from(["=", " = ", ": ", ':"', "="]),
        chars(B64, 40),
    ),
    "gcp_api_key": st.builds(lambda s: ("AIza" + s, "AIza" + s), chars(URLSAFE, 35)),
    "azure_storage_key": st.builds(
        lambda k: (
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={k}==;EndpointSuffix=core.windows.net",
            k,
        ),
        chars(B64, 86),
    ),
    "github_token": st.one_of(
        st.builds(
            lambda p, s: (p + s, p + s), st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), chars(ALNUM, 36)
        ),
        st.builds(lambda s: ("github_pat_" + s, "github_pat_" + s), chars(ALNUM + "_", 82)),
    ),
    "gitlab_token": st.builds(lambda s: ("glpat-" + s, "glpat-" + s), chars(URLSAFE, 20)),
    "npm_token": st.builds(lambda s: ("npm_" + s, "npm_" + s), chars(ALNUM, 36)),
    "pypi_token": st.builds(
        lambda s: ("pypi-AgEIcHlwaS5vcmc" + s, "pypi-AgEIcHlwaS5vcmc" + s), chars(URLSAFE, 50, 200)
    ),
    "slack_token": st.builds(
        lambda c, s: (f"xox{c}-{s}", f"xox{c}-{s}"), st.sampled_from("abprs"), chars(ALNUM + "-", 10, 60)
    ),
    "slack_webhook": st.builds(
        lambda a, b, c: (lambda u: (u, u))(f"https://hooks.slack.com/services/T{a}/B{b}/{c}"),
        chars(UPPER_DIGITS, 8),
        chars(UPPER_DIGITS, 8),
        chars(ALNUM, 24),
    ),
    "stripe_key": st.builds(
        lambda p, s: (p + s, p + s), st.sampled_from(["sk_live_", "rk_live_", "sk_test_"]), chars(ALNUM, 24, 99)
    ),
    "jwt": st.builds(
        lambda alg, sub, sig: (lambda t: (t, t))(f"{b64url({'alg': alg, 'typ': 'JWT'})}.{b64url({'sub': sub})}.{sig}"),
        st.sampled_from(["HS256", "RS256", "none"]),
        st.text(max_size=20),
        chars(URLSAFE, 0, 86),
    ),
    "bearer_token": st.builds(
        lambda t: (f"Bearer {t}", t), chars(ALNUM + "-._~+/", 16, 80).filter(lambda t: not t.isalpha())
    ),
    "authorization": st.builds(
        lambda scheme, t: (f"Authorization: {scheme}{t}", t),
        st.sampled_from(["Basic ", "Token ", ""]),
        chars(B64 + "=", 8, 60).filter(lambda t: not t.isalpha()),
    ),
    "url_password": st.builds(
        lambda scheme, user, pw, host: (f"{scheme}://{user}:P!{pw}@{host}/db", "P!" + pw),
        st.sampled_from(["postgres", "https", "redis", "mongodb+srv", "amqp"]),
        chars(ALNUM + "._-", 0, 12),
        chars(ALNUM + "!$%&*()=-._~:@", 1, 30).filter(lambda pw: not placeholder("P!" + pw)),
        st.sampled_from(["db.example.com", "localhost:5432"]),
    ),
    "google_client_secret": st.builds(lambda s: ("GOCSPX-" + s, "GOCSPX-" + s), chars(URLSAFE, 28)),
    "google_oauth_token": st.builds(lambda s: ("ya29." + s, "ya29." + s), chars(URLSAFE, 30, 120)),
    "anthropic_api_key": st.builds(
        lambda s: (f"sk-ant-api03-{s}AA", f"sk-ant-api03-{s}AA"), chars(ALNUM, 90).map(lambda s: "Zq7" + s)
    ),
    "openai_api_key": st.one_of(
        st.builds(
            lambda p, s: (p + s, p + s),
            st.sampled_from(["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-"]),
            chars(ALNUM, 40, 160).map(lambda s: "Zq7" + s),
        ),
        st.builds(lambda a, b: (f"sk-{a}T3BlbkFJ{b}", f"sk-{a}T3BlbkFJ{b}"), chars(ALNUM, 20), chars(ALNUM, 20)),
    ),
    "huggingface_token": st.builds(
        lambda p, s: (p + s, p + s),
        st.sampled_from(["hf_", "api_org_"]),
        chars(ALNUM[:52], 28).map(lambda s: "AbCdEf" + s),
    ),
    **{
        kind: st.builds(lambda form, v: (form.format(v=v), v), st.sampled_from(forms), VALUES)
        for kind, forms in ASSIGNMENTS.items()
    },
}

# text around a secret: anything that cannot glue itself onto the token
FILLER = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40).map(lambda s: s + " ")


def test_every_kind_has_a_shape_and_is_documented() -> None:
    assert set(SHAPES) == set(KINDS) == {rule.kind for rule in secrets._RULES} | set(ASSIGNMENTS)


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
    assert secret not in out[len(before) : len(out) - len(after)]
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
@given(
    st.one_of(
        st.text(alphabet="0123456789abcdef", min_size=40, max_size=64),
        st.uuids().map(str),
        st.binary(min_size=1, max_size=300).map(lambda b: base64.b64encode(b).decode()),
        st.lists(st.text(alphabet=ALNUM + "._-", min_size=1, max_size=12), min_size=1, max_size=6).map(
            lambda p: "/" + "/".join(p)
        ),
        st.lists(
            st.sampled_from(["the", "token", "secret", "npm", "pypi", "key", "password", "bearer", "of", "a", "is"]),
            max_size=20,
        ).map(" ".join),
        st.builds(
            lambda h, p: f"https://{h}.example.org/{p}?a=1",
            st.text(alphabet="abc", min_size=1, max_size=8),
            st.text(alphabet=ALNUM, max_size=20),
        ),
    )
)
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
    start = time.process_time()
    find_secrets(text)
    assert time.process_time() - start < 3.0  # ~0.2 s of CPU; backtracking takes minutes


def test_no_match_is_longer_than_the_documented_bound() -> None:
    longest = [
        pem("RSA ", "A" * 100_000),
        "ghp_" + "a" * 100_000,
        "github_pat_" + "a" * 100_000,
        "glpat-" + "a" * 100_000,
        "npm_" + "a" * 100_000,
        "pypi-AgEIcHlwaS5vcmc" + "a" * 100_000,
        "xoxb-" + "a" * 100_000,
        "sk_live_" + "a" * 100_000,
        "https://hooks.slack.com/services/" + "a" * 100_000,
        b64url({"alg": "x"}) + "a" * 4000 + "." + "b" * 100_000 + "." + "c" * 100_000,
        "Bearer 1" + "a" * 100_000,
        "Authorization: Basic " + "a" * 100_000,
        "AccountKey=" + "a" * 100_000,
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
    for key, kind in [
        ("password", "password"),
        ("DB_PASSWORD", "password"),
        ("passwd", "password"),
        ("userPassword", "password"),
        ("client_secret", "secret"),
        ("token", "token"),
        ("access-token", "token"),
        ("api_key", "api_key"),
        ("X-API-Key", "api_key"),
        ("Authorization", "authorization"),
        ("private_key", "private_key"),
        ("Cookie", "cookie"),
    ]:
        assert key_kind(key) == kind, key
    for key in ["path", "max_tokens", "tokens", "secretary", "keyboard", "passage", "author", "content"]:
        assert key_kind(key) is None, key


def test_a_value_under_a_secret_key_is_replaced_whole() -> None:
    out, findings = redact_value(
        {
            "path": "/a",
            "password": {"nested": [1, 2]},
            "token": 12345,
            "secret": None,
            "api_key": "",
            "headers": {"Authorization": "Basic dXNlcjpwYXNz"},
        }
    )
    assert out == {
        "path": "/a",
        "password": "[REDACTED:password]",
        "token": "[REDACTED:token]",
        "secret": None,
        "api_key": "",
        "headers": {"Authorization": "[REDACTED:authorization]"},
    }
    assert findings == [
        Finding("password", "/password"),
        Finding("token", "/token"),
        Finding("authorization", "/headers/Authorization"),
    ]


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
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=30,
    )
)
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


# -- Speed (docs/inspect.md, "Speed"): find_secrets gives exactly what the slow exact path gives:
# every rule's finditer over the whole text (no prefilter, no finders), in the text without its
# default-ignorable characters (the oracle, below). A difference is a miss of the fast path.

_IGNORABLE = {chr(cp) for lo, hi in IGNORABLE for cp in range(lo, hi + 1)}


def exact_find_secrets(text: str) -> list[tuple[str, int, int]]:
    """The slow exact path (the oracle)."""
    if len(text) < 8:
        return []
    keep = [i for i, c in enumerate(text) if c not in _IGNORABLE]
    clean = "".join(text[i] for i in keep)
    found = []
    for order, rule in enumerate(secrets._RULES):
        for match in rule.pattern.finditer(clean):
            if rule.pick is not None:
                picked = rule.pick(match)
                if picked is None:
                    continue
                kind, start, end = picked
            else:
                if rule.check is not None and not rule.check(match):
                    continue
                kind, (start, end) = rule.kind, match.span(rule.group)
            if end > start and not clean.startswith("[REDACTED:", start):  # markers are no secrets
                found.append((start, -end, order, kind))
    out: list[tuple[str, int, int]] = []
    for start, neg_end, _order, kind in sorted(found):
        if out and start < out[-1][2]:
            if -neg_end > out[-1][2]:
                out[-1] = (out[-1][0], out[-1][1], -neg_end)
            continue
        out.append((kind, start, -neg_end))
    return [(kind, keep[start], keep[end - 1] + 1) for kind, start, end in out]


def test_a_redacted_text_has_no_finding() -> None:
    for text in (
        "Authorization: Basic [REDACTED:authorization]",
        "postgres://u:[REDACTED:url_password]@db/x",
        "aws_secret_access_key=[REDACTED:aws_secret_access_key]",
    ):
        assert find_secrets(text) == []
    redacted, kinds = redact_text("Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ== and https://u:hunter22@db/x")
    assert kinds and find_secrets(redacted) == []


# what glues onto a secret or cuts it: its prefixes and labels, in any case, separators, other
# scripts, lone surrogates
_PIECES = [
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "AIza",
    "secret",
    "SECRET_access-KEY",
    "secret.key",
    "AccountKey=",
    "SharedAccessKey=",
    "ghp_",
    "gho_",
    "github_pat_",
    "glpat-",
    "npm_",
    "pypi-AgEIcHlwaS5vcmc",
    "pypi-AgENdGVzdC5weXBpLm9yZw",
    "https://hooks.slack.com/services/",
    "xox",
    "xoxb-",
    "xoxox",
    "sk_live_",
    "rk_test_",
    "k_live_",
    "eyJ",
    "eyJhbGciOiJIUzI1NiJ9.",
    "Authorization",
    "proxy-",
    "Proxy-Authorization",
    "bearer",
    "Bearer ",
    "Basic ",
    "://",
    "a://",
    "a://b:",
    "https://",
    "@",
    "-----BEGIN PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----",
    "=",
    "==",
    ":",
    ": ",
    '"',
    "'",
    " ",
    "\t",
    "\n",
    ".",
    "/",
    "+",
    "_",
    "-",
    "?",
    "#",
    "<",
    ">",
    ";",
    ",",
    "é",
    "\u212a",
    "\u0130",
    "\ud800",
    "\U0001f600",
    "\u00a0",
    "\u2003",
    "\u3000",
    "\x85",
    "//",
    "u:p@",
    ":pw@h",
    "?q=1",
    "[::1]",
    "sk-",
    "sk-ant-",
    "sk-proj-",
    "T3BlbkFJ",
    "hf_",
    "api_org_",
    "GOCSPX-",
    "ya29.",
    "PASSWORD",
    "DB_PASSWORD=",
    "password",
    "Password=",
    "_authToken=",
    "token",
    "TOKEN=",
    "secret",
    "api_key",
    "apiKey",
    "x-api-key",
    "pwd",
    "export ",
    "- ",
    ":=",
    "=>",
    "==",
    "\n",
    ";",
    "&",
    "?",
    '"password": "',
    "'",
    "$",
    "${",
    "%",
    "<",
    "{",
    "(",
    "\u200b",
    "\u00ad",
    "\u2060",
    "\ufeff",
    "\u034f",
    "\U000e0041",
    "/home",
    "+ x",
    ".format(",
    "p@ss@",
    "@h/",
]
_NOISE = st.one_of(
    st.sampled_from(_PIECES),
    st.sampled_from(_PIECES).map(str.swapcase),
    chars(ALNUM, 1, 48),
    chars(B64 + "=-_.", 1, 48),
    st.text(max_size=6),
    st.text(alphabet="aZ1:/@?#.-_=+ \t\u00a0\u2003é'\"<>[]", min_size=1, max_size=16),  # the innards of URLs, labels
    st.builds(
        lambda scheme, user, pw: f"{scheme}://{user}:{pw}@",
        st.sampled_from(["a", "https", "x" * 32, "é"]),
        *[st.text(alphabet="aZ1_.-~!$\u00a0\u2003é\U0001f600?#[:'\" ", max_size=8)] * 2,
    ),
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
def test_find_secrets_is_the_exact_path(text: str) -> None:
    assert [tuple(s) for s in find_secrets(text)] == exact_find_secrets(text)


# every alternative of every rule's start, whole and glued to a word character before it
_STARTS = [
    *(p + "A" * 16 for p in ("AKIA", "ASIA", "ABIA", "ACCA")),
    *(f"gh{c}_" + "a" * 36 for c in "pousr"),
    "github_pat_" + "a" * 22,
    "glpat-" + "a" * 20,
    "npm_" + "a" * 36,
    *(f"xox{c}-" + "a" * 10 for c in "abeprs"),
    *(p + "a" * 10 for p in ("sk_live_", "sk_test_", "rk_live_", "rk_test_")),
    *(p + "A" * 20 for p in ("AccountKey=", "accountKEY=", "SharedAccessKey=", "SHAREDACCESSKEY=")),
    *(
        p + ": Basic " + "a1" * 4
        for p in ("authorization", "AUTHORIZATION", "Proxy-Authorization", "PROXY-authorization")
    ),
    "bEaReR " + "a1" * 8,
    "Bearer\t\t" + "a1" * 8,
    "SeCrEt_KeY=" + "A" * 40,
    "secret key: " + "A" * 40,
    "Secret Access Key =\t'" + "A" * 40,
    "secret-access.key:=>" + "A" * 40,
    "'SECRETKEY'" + "\t" * 8 + ":" + "A" * 40,
    '"Authorization": "Basic ' + "a1" * 4,
    "'authorization'\t=\t'" + "a1" * 4,
    "eyJhbGciOiJub25lIn0.e30.",
    "pypi-AgENdGVzdC5weXBpLm9yZw" + "a" * 20,
    "https://hooks.slack.com/triggers/" + "a" * 10,
    "GOCSPX-" + "a" * 28,
    "ya29." + "a" * 30,
    "sk-ant-" + "aB3" * 11,
    "sk-" + "aB3" * 14,
    "sk-proj-" + "aB3" * 14,
    "hf_" + "aBc" * 11 + "aB",
    "api_org_" + "aBc" * 11 + "aB",
    "DB_PASSWORD=hunter22",
    "Password=hunter;",
    "- TOKEN=abcdef",
    '"password": "s3cret!x"',
    "password: s3cret!x",
    "x" * 60 + "_token=abc123",
    "a.b-c_password := v4lue1",
    "a://b:@@c@d",
    "a://b:p@ss@h/x",
]


@pytest.mark.parametrize(
    "text",
    [
        *ADVERSARIAL.values(),
        *_STARTS,
        *("x" + t for t in _STARTS),
        *("-" + t for t in _STARTS),
        "xoxoxb-" + "a" * 20,
        "AKIAKIA" + "A" * 20,
        "e" + "a" * 31 + "://u:p@h",
        "e" + "a" * 32 + "://u:p@h",
        "a://b:c@" * 3 + "d",
        "xproxy-authorization: " + "a1" * 8,
        "Proxy-Authorization: Basic " + "a1" * 8,
        "sk_live_k_live_" + "a" * 20,
        "a://u\u00a0x:p\u2003w@h",
        "a://u:p\u00e9?@h",
        "AccountKey=SharedAccessKey=" + "A" * 30,
        "gh\u200bp_" + "a" * 36,
        "ghp_" + "a" * 20 + "\u00ad" + "a" * 16,
        "\u2060" * 8 + "AKIA" + "A" * 16,
        "DB_PASS\u200bWORD=hunter22",
        "\u200b" * 100_000 + "xoxb-" + "a" * 10,
    ],
)
def test_find_secrets_is_the_exact_path_on_edges(text: str) -> None:
    assert [tuple(s) for s in find_secrets(text)] == exact_find_secrets(text)


def test_an_environment_reference_in_an_authorization_header_is_no_secret() -> None:
    """A config's `Authorization: Bearer ${TOKEN}` (what `wrap --header` and protect write:
    docs/remote.md, "Options") names a variable; the token itself is still found."""
    for text in (
        "Authorization: Bearer ${GITHUB_TOKEN}",
        "authorization=$API_TOKEN",
        "Authorization: %TOKEN%",
        '"--header-env", "Authorization=ASSAY_HEADER_1"',
        "`Authorization=ASSAY_HEADER_1`.",
    ):
        assert find_secrets(text) == [], text
    token = "ab12" * 6
    assert [s.kind for s in find_secrets(f"Authorization: Bearer {token}")] == ["authorization"]
    assert [s.kind for s in find_secrets("Authorization: Bearer ABCD1234EFGH5678")] == ["authorization"]


@pytest.mark.parametrize(
    "text",
    [
        "self.static_authorization = any(name.lower() == 'authorization' for name in static)",
        'ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"',
        "token = read_token(path_to_the_file)",
        "Authorization = build_header(scheme, value)",
    ],
)
def test_code_that_names_a_secret_key_holds_no_secret(text):
    # code and token-type URNs beside a key that names a secret (the project's own OAuth client
    # is full of them): no finding (docs/inspect.md, "Keys that name a secret")
    assert find_secrets(text) == []


def test_a_value_in_an_env_line_is_a_secret_however_it_looks():
    assert [s.kind for s in find_secrets("DB_PASSWORD=s3cr3tP4ss\n")] == ["password"]
