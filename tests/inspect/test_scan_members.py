"""A member whose name names a secret (docs/inspect.md, "Keys that name a secret"): a key counts
alike in a text and in a JSON value, so ``{"db_password": "..."}`` in a structured result is a
secret and is masked whole, and the line gate never calls a line with such a member quiet, with
any JSON white space before its colon."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.inspect.linegate import quiet
from assay.inspect.scan import scan, splice
from assay.inspect.secret_keys import key_kind, member_secret

from tests.wrap.test_session_inspect import answer, call, session

VALUE = "Xy7kq2pqZ9"


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("password", "password"),
        ("DB_PASSWORD", "password"),
        ("Pass-Word", "password"),
        ("passphrase", "password"),
        ("client_secret", "secret"),
        ("secretAccessKey", "secret"),
        ("GITHUB_TOKEN", "token"),
        ("auth token", "token"),
        ("x-api-key", "api_key"),
        ("apiKey", "api_key"),
        ("TO\u212aEN", "token"),  # a Kelvin sign lowercases to k
    ],
)
def test_a_member_that_names_a_secret_is_found_and_masked_whole(key: str, kind: str) -> None:
    value = {"content": [], "structuredContent": {"user": "app", key: VALUE, "n": 3}}
    found = scan(value, secrets_on=True, injection_on=True, mask=True, strip=True)
    pointer = "/structuredContent/" + key.replace("~", "~0").replace("/", "~1")
    assert [(f.check, f.kind, f.pointer) for f in found.findings] == [("secrets", kind, pointer)]
    assert found.values == [VALUE] and "secrets" in found.kinds
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": value}, ensure_ascii=False).encode()
    masked = splice(line, found.changed)
    assert masked is not None and VALUE.encode() not in masked
    assert json.loads(masked)["result"]["structuredContent"][key] == f"[REDACTED:{kind}]"
    assert not found.changed or scan(value, secrets_on=True, injection_on=False).findings  # detect only: still found


@pytest.mark.parametrize(
    "member",
    [
        {"password": "changeme"},
        {"token": "${GITHUB_TOKEN}"},
        {"api_key": "<your-key>"},
        {"secret": "short"},
        {"next_page_token": "abc123def"},
        {"token_type": "Bearer"},
        {"password": 12345678},
        {"password_hint": "a1b2c3d4"},
        {"token": "/home/you/.token"},
        {"description": "the token to send"},
    ],
)
def test_a_member_that_is_no_secret_is_not_found(member: dict) -> None:
    assert scan({"structuredContent": member}, secrets_on=True, injection_on=True).findings == []


def test_members_are_not_looked_for_when_secrets_are_off() -> None:
    assert scan({"password": VALUE}, secrets_on=False, injection_on=True).findings == []


def test_arguments_with_such_a_member_hold_a_secret() -> None:
    h = session("inspect: {arguments: {secrets: deny}}\n")
    assert call(h, 1, "login", {"user": "app", "password": VALUE}).disposition == "blocked"
    assert call(h, 2, "login", {"user": "app", "password": "${DB_PASSWORD}"}).disposition != "blocked"


SEPARATORS = ["", " ", "\r\t ", " " * 20]  # (a line of stdio has no LF; the gate's test below has them)


@pytest.mark.parametrize("before", SEPARATORS)
@pytest.mark.parametrize("after", SEPARATORS)
def test_wrap_masks_a_structured_member_however_the_json_is_spaced(before: str, after: str) -> None:
    h = session("inspect: {secrets: mask, injection: strip}\n")
    call(h, 1, "read")
    line = (
        '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}],'
        f'"structuredContent":{{"db_password"{before}:{after}"{VALUE}","host":"db"}}}}}}'
    ).encode()
    got, inspected, _ = answer(h, line)
    assert VALUE.encode() not in got
    assert json.loads(got)["result"]["structuredContent"]["db_password"] == "[REDACTED:password]"
    assert [f["pointer"] for f in inspected[0]["findings"]] == ["/structuredContent/db_password"]


KEY_WORDS = ["password", "passwd", "pwd", "passphrase", "secret", "secret_key", "secretAccessKey", "token", "api_key"]
KEYS = st.builds(
    lambda head, word, seps, upper: (
        head + "".join(c.upper() if u else c for c, u in zip("".join(ch + s for ch, s in zip(word, seps)), upper))
    ),
    st.sampled_from(["", "db_", "X-", "my.", "client "]),
    st.sampled_from(KEY_WORDS),
    st.lists(st.sampled_from(["", "", "", "_", "-", ".", " "]), min_size=16, max_size=16),
    st.lists(st.booleans(), min_size=40, max_size=40),
)
WHITE = st.text(alphabet=" \t\r\n", max_size=6)


@settings(max_examples=400, deadline=None)
@given(KEYS, st.text(alphabet="abcXYZ0123456789!#%+=/-", min_size=0, max_size=16), WHITE, WHITE, st.booleans())
def test_a_line_with_a_member_secret_is_never_quiet(
    key: str, value: str, before: str, after: str, nested: bool
) -> None:
    member = f"{json.dumps(key)}{before}:{after}{json.dumps(value)}"
    body = f'{{"a":[{{{member}}}]}}' if nested else f"{{{member}}}"
    line = f'{{"jsonrpc":"2.0","id":1,"result":{body}}}'.encode()
    kind = member_secret(key, value)
    found = scan(json.loads(line)["result"], secrets_on=True, injection_on=False).findings
    if kind is not None:
        assert key_kind(key) == kind
        assert any(f.kind == kind for f in found), (line, found)
    if found:
        assert not quiet(line, secrets=True, injection=False), line
        assert not quiet(line, secrets=True, injection=True), line
