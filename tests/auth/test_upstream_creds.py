"""The sans-IO parts of serve's credentials to upstreams (docs/serve.md, "Credentials to
upstreams"), in memory: the token requests, the token endpoint's answer read with every check,
the token cache on an injected clock and its bounds, and reading a secret."""

from __future__ import annotations

import base64
import json
import os
from urllib.parse import unquote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.auth.upstream_auth import SECRET_CAP, read_secret
from assay.auth.upstream_creds import (
    ACCESS_TOKEN_TYPE,
    DEFAULT_LIFETIME,
    MAX_LIFETIME,
    TokenCache,
    UpstreamCredError,
    client_credentials_request,
    read_token_response,
    token_exchange_request,
)
from assay.gateway.config import ClientCredentials, Secret, TokenExchange

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def _basic(value: str) -> tuple[str, str]:
    scheme, _, blob = value.partition(" ")
    assert scheme == "Basic"
    cid, _, secret = base64.b64decode(blob).decode().partition(":")
    return unquote_plus(cid), unquote_plus(secret)


def _answer(status: int = 200, **doc: object) -> tuple[int, bytes]:
    return status, json.dumps(doc).encode()


# -- the requests ---------------------------------------------------------------------------------


def test_client_credentials_request_authenticates_with_basic():
    cred = ClientCredentials("https://as.example/token", "gw client", Secret(env="S"), scope="a b", audience="up")
    req = client_credentials_request(cred, "s3cr:et")
    assert req.url == "https://as.example/token"
    assert req.form == {"grant_type": "client_credentials", "scope": "a b", "audience": "up"}
    assert _basic(req.headers["Authorization"]) == ("gw client", "s3cr:et")
    assert "s3cr:et" not in repr(req)


def test_token_exchange_request_carries_the_subject_token_and_the_audience():
    cred = TokenExchange("https://as.example/token", "gw", Secret(env="S"), audience="https://up.example")
    req = token_exchange_request(cred, "secret", "user-token")
    assert req.form == {
        "grant_type": EXCHANGE,
        "subject_token": "user-token",
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        "audience": "https://up.example",
    }
    assert _basic(req.headers["Authorization"]) == ("gw", "secret")
    assert "user-token" not in repr(req)
    scoped = token_exchange_request(TokenExchange("https://as/t", "gw", Secret(env="S"), "aud", "read"), "s", "t")
    assert scoped.form["scope"] == "read"


# -- the answer -----------------------------------------------------------------------------------


def test_a_good_answer_gives_the_token_and_its_lifetime():
    issued = read_token_response(
        *_answer(access_token="tok", token_type="bearer", expires_in=60), what="x", exchange=False
    )
    assert (issued.access_token, issued.lifetime) == ("tok", 60.0)
    assert "tok" not in repr(issued)
    exchanged = read_token_response(
        *_answer(access_token="t", token_type="Bearer", expires_in="90", issued_token_type=ACCESS_TOKEN_TYPE),
        what="x",
        exchange=True,
    )
    assert exchanged.lifetime == 90.0
    default = read_token_response(*_answer(access_token="t", token_type="Bearer"), what="x", exchange=False)
    assert default.lifetime == DEFAULT_LIFETIME
    long = read_token_response(
        *_answer(access_token="t", token_type="Bearer", expires_in=10**9), what="x", exchange=False
    )
    assert long.lifetime == MAX_LIFETIME


@pytest.mark.parametrize(
    ("status", "body", "exchange", "expect"),
    [
        (200, b"not json", False, "is not a JSON object"),
        (200, b"[1]", False, "is not a JSON object"),
        (200, json.dumps({"token_type": "Bearer"}).encode(), False, "no usable access_token"),
        (200, json.dumps({"access_token": 5, "token_type": "Bearer"}).encode(), False, "no usable access_token"),
        (200, json.dumps({"access_token": "a b", "token_type": "Bearer"}).encode(), False, "no usable access_token"),
        (200, json.dumps({"access_token": "t" * 16385, "token_type": "Bearer"}).encode(), False, "no usable"),
        (
            200,
            json.dumps({"access_token": "t", "token_type": "mac"}).encode(),
            False,
            "not a Bearer token (token_type mac)",
        ),
        (200, json.dumps({"access_token": "t"}).encode(), False, "not a Bearer token (token_type NoneType)"),
        (200, json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": 0}).encode(), False, "expires_in"),
        (
            200,
            json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": -5}).encode(),
            False,
            "expires_in",
        ),
        (
            200,
            json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": True}).encode(),
            False,
            "expires_in",
        ),
        (
            200,
            json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": None}).encode(),
            False,
            "expires_in",
        ),
        (200, b'{"access_token": "t", "token_type": "Bearer", "expires_in": NaN}', False, "expires_in"),
        (200, b'{"access_token": "t", "token_type": "Bearer", "expires_in": Infinity}', False, "expires_in"),
        (200, json.dumps({"access_token": "t", "token_type": "Bearer"}).encode(), True, "issued_token_type"),
        (
            200,
            json.dumps({"access_token": "t", "token_type": "Bearer", "issued_token_type": "urn:x"}).encode(),
            True,
            "not an access token",
        ),
        (200, None, False, "too long (HTTP 200)"),
        (500, b"<html>", False, "refused x (HTTP 500)"),
        (400, json.dumps({"error": "invalid_grant"}).encode(), True, "refused x (HTTP 400, invalid_grant)"),
    ],
)
def test_every_check_of_the_answer(status, body, exchange, expect):
    with pytest.raises(UpstreamCredError) as err:
        read_token_response(status, body, what="x", exchange=exchange)
    assert expect in str(err.value)
    assert "\n" not in str(err.value)


def test_a_refusal_shows_error_and_description_sanitized_and_never_a_secret():
    body = json.dumps(
        {
            "error": 'invalid_grant\n"evil\x1b',
            "error_description": "subject USER-TOKEN-123 unknown\nto\x1b[31m client SECRET-456; " + "x" * 500,
        }
    ).encode()
    with pytest.raises(UpstreamCredError) as err:
        read_token_response(
            400, body, what="the token exchange for upstream docs", exchange=True, hide=("USER-TOKEN-123", "SECRET-456")
        )
    text = str(err.value)
    assert text.startswith(
        "the token endpoint refused the token exchange for upstream docs (HTTP 400, invalid_grantevil: subject [hidden] unknown to"
    )
    assert "USER-TOKEN-123" not in text and "SECRET-456" not in text
    assert text.isprintable() and len(text) < 320


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_members = st.fixed_dictionaries(
    {},
    optional={
        "access_token": st.text(max_size=30) | _json,
        "token_type": st.sampled_from(["Bearer", "bearer", "BEARER", "mac", "N_A", ""]) | _json,
        "expires_in": st.integers(-5, 10**12) | st.floats() | st.text(max_size=12) | _json,
        "issued_token_type": st.just(ACCESS_TOKEN_TYPE) | st.text(max_size=30),
        "error": st.text(max_size=100) | _json,
        "error_description": st.text(max_size=600) | _json,
        "refresh_token": _json,
    },
)


@given(
    status=st.sampled_from([200, 200, 200, 400, 401, 500]),
    body=st.one_of(
        _members.map(lambda d: json.dumps(d).encode()),
        st.binary(max_size=200),
        _json.map(lambda v: json.dumps(v).encode()),
        st.none(),
    ),
    exchange=st.booleans(),
)
def test_any_answer_is_a_token_or_the_one_line_error(status, body, exchange):
    secret = "HIDDEN-SECRET-VALUE"
    try:
        issued = read_token_response(status, body, what="x", exchange=exchange, hide=(secret,))
    except UpstreamCredError as exc:
        text = str(exc)
        assert text.isprintable() and len(text) < 600
        assert secret not in text
        doc = json.loads(body) if body is not None and status == 200 and body[:1] == b"{" else None
        if isinstance(doc, dict) and isinstance(doc.get("access_token"), str) and len(doc["access_token"]) > 3:
            assert doc["access_token"] not in text
        return
    assert status == 200
    assert 0 < issued.lifetime <= MAX_LIFETIME
    assert issued.access_token.isascii() and " " not in issued.access_token


# -- the cache ------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_token_is_kept_until_shortly_before_it_expires():
    clock = Clock()
    cache = TokenCache(now=clock)
    cache.put(("user:a", "docs", "aud"), "tok", 100.0)  # dropped 10 s early (a tenth)
    assert cache.get(("user:a", "docs", "aud")) == "tok"
    assert cache.get(("user:b", "docs", "aud")) is None
    clock.t += 89.9
    assert cache.get(("user:a", "docs", "aud")) == "tok"
    clock.t += 0.1
    assert cache.get(("user:a", "docs", "aud")) is None
    assert len(cache) == 0 and cache.bytes == 0
    cache.put(("", "docs", ""), "long", 3600.0)  # dropped 30 s early (at most EARLY)
    clock.t += 3569.9
    assert cache.get(("", "docs", "")) == "long"
    clock.t += 0.1
    assert cache.get(("", "docs", "")) is None


def test_drop_forgets_only_the_token_refused():
    cache = TokenCache(now=Clock())
    key = ("user:a", "docs", "aud")
    cache.put(key, "new", 60.0)
    cache.drop(key, "old")  # another task already put a fresh one
    assert cache.get(key) == "new"
    cache.drop(key, "new")
    assert cache.get(key) is None


def test_the_cache_is_bounded_in_entries_and_bytes():
    clock = Clock()
    cache = TokenCache(now=clock, max_entries=3, max_bytes=10_000)
    for i in range(5):
        cache.put((f"user:{i}", "docs", "aud"), f"t{i}", 60.0)
    assert len(cache) == 3
    assert [cache.get((f"user:{i}", "docs", "aud")) for i in range(5)] == [None, None, "t2", "t3", "t4"]
    # bytes: a big token pushes out the least recently used
    cache = TokenCache(now=clock, max_entries=100, max_bytes=1000)
    cache.put(("user:a", "d", "a"), "a" * 300, 60.0)
    cache.put(("user:b", "d", "a"), "b" * 300, 60.0)
    cache.get(("user:a", "d", "a"))
    cache.put(("user:c", "d", "a"), "c" * 300, 60.0)
    assert cache.bytes <= 1000
    assert cache.get(("user:b", "d", "a")) is None
    assert cache.get(("user:a", "d", "a")) == "a" * 300
    # a token larger than the whole cache is not kept
    cache.put(("user:d", "d", "a"), "d" * 2000, 60.0)
    assert cache.get(("user:d", "d", "a")) is None and cache.bytes <= 1000
    # expired entries go before live ones
    cache = TokenCache(now=clock, max_entries=2)
    cache.put(("user:old", "d", "a"), "o", 10.0)
    cache.put(("user:live", "d", "a"), "l", 600.0)
    cache.get(("user:old", "d", "a"))  # the most recently used, but expired below
    clock.t += 20
    cache.put(("user:new", "d", "a"), "n", 600.0)
    assert cache.get(("user:live", "d", "a")) == "l"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "get", "drop", "tick"]),
            st.integers(0, 9),
            st.text(alphabet="abc", min_size=1, max_size=200),
            st.floats(0.5, 500),
        ),
        max_size=60,
    )
)
def test_the_bounds_hold_whatever_is_done(ops):
    clock = Clock()
    cache = TokenCache(now=clock, max_entries=4, max_bytes=600)
    for op, user, token, seconds in ops:
        key = (f"user:{user}", "docs", "aud")
        if op == "put":
            cache.put(key, token, seconds)
        elif op == "get":
            cache.get(key)
        elif op == "drop":
            cache.drop(key)
        else:
            clock.t += seconds
        assert len(cache) <= 4 and 0 <= cache.bytes <= 600


# -- secrets --------------------------------------------------------------------------------------


def test_read_secret_from_a_file_or_a_variable(tmp_path):
    (tmp_path / "s").write_text("value with space\n")
    assert read_secret(Secret(file="s"), str(tmp_path), {}) == "value with space"
    (tmp_path / "crlf").write_bytes(b"v\r\n")
    assert read_secret(Secret(file="crlf"), str(tmp_path), {}) == "v"
    assert read_secret(Secret(file=str(tmp_path / "s")), "/elsewhere", {}) == "value with space"
    assert read_secret(Secret(env="TOKEN"), str(tmp_path), {"TOKEN": "abc"}) == "abc"


def test_a_missing_secret_is_one_line_naming_the_source_never_the_value(tmp_path):
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "big").write_bytes(b"x" * (SECRET_CAP + 1))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    cases = {
        Secret(file="nope"): "nope: No such file or directory",
        Secret(file="empty"): "empty: empty",
        Secret(file="big"): "larger than the 65536-byte limit",
        Secret(file="fifo"): "not a regular file (a FIFO)",
        Secret(file="bin"): "not UTF-8 text",
        Secret(env="UNSET"): "the environment variable UNSET is not set",
        Secret(env="EMPTY"): "the environment variable EMPTY is empty",
    }
    for secret, expect in cases.items():
        with pytest.raises(UpstreamCredError) as err:
            read_secret(secret, str(tmp_path), {"EMPTY": "", "OTHER": "the-value"})
        assert expect in str(err.value)
        assert "\n" not in str(err.value) and "the-value" not in str(err.value)
