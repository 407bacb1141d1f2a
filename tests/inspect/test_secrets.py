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
