"""The sans-IO core of the OAuth client in memory (docs/auth.md): the challenge a server writes,
the discovery documents, the scope asked for, the authorization response, the token response,
the client's authentication method, a stored record and its binding; and the lock file."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.auth import clientauth, grants
from assay.auth.challenge import parse, refusal
from assay.auth.discovery import (
    DiscoveryError,
    as_urls,
    check_resource,
    check_server,
    prm_urls,
    select_scope,
)
from assay.auth.record import IssuerChanged, RecordError, check_binding, read

AS = "https://as.example"
META = {
    "issuer": AS,
    "token_endpoint": f"{AS}/token",
    "authorization_endpoint": f"{AS}/authorize",
    "code_challenge_methods_supported": ["S256"],
}
TOKEN = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!#$%&'*+^`|~", min_size=1, max_size=12
)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            TOKEN,
            st.dictionaries(
                TOKEN.map(str.lower),
                st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=30),
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)
def test_challenges_read_back_as_written(challenges, spaces):
    """Any schemes and parameters, values quoted with escapes: what a server writes is read."""
    sep = " , " if spaces else ","
    text = sep.join(
        scheme + (" " + sep.join(f"{k}={_quoted(v)}" for k, v in params.items()) if params else "")
        for scheme, params in challenges
    )
    read_back = parse([text])
    assert [(c.scheme, c.params) for c in read_back] == [(s.lower(), p) for s, p in challenges]


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300))
def test_any_header_is_read_without_failing(text):
    for c in parse([text]):
        assert c.scheme and all(isinstance(v, str) for v in c.params.values())
    refusal(401, [text])
    refusal(403, [text])


def test_what_a_response_asks():
    hint = "https://mcp.example/.well-known/oauth-protected-resource/mcp"
    got = refusal(401, [f'Basic realm="x", Bearer error="invalid_token", resource_metadata="{hint}"'])
    assert got is not None and got.resource_metadata == hint and not got.step_up
    up = refusal(403, ['Bearer error="insufficient_scope", scope="a b"'])
    assert up is not None and up.step_up and up.scope == "a b"
    assert refusal(403, ['Bearer error="forbidden"']) is None and refusal(200, []) is None
    assert refusal(401, []) is not None  # a bare 401 still asks for a token


def test_where_the_metadata_is_looked_for():
    assert prm_urls("https://mcp.example/a/mcp", "https://meta.example/prm") == [
        "https://meta.example/prm",
        "https://mcp.example/.well-known/oauth-protected-resource/a/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource",
    ]
    # a remote server cannot send wrap to a plain-http or a loopback address
    assert prm_urls("https://mcp.example/mcp", "http://127.0.0.1:9/prm")[0].startswith("https://mcp.example/")
    assert prm_urls("https://mcp.example/mcp", "http://evil.example/prm")[0].startswith("https://mcp.example/")
    assert prm_urls("http://127.0.0.1:5/mcp", "http://127.0.0.1:9/prm")[0] == "http://127.0.0.1:9/prm"
    assert as_urls("https://as.example/tenant/") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant",
        "https://as.example/.well-known/openid-configuration/tenant",
        "https://as.example/tenant/.well-known/openid-configuration",
    ]
    assert as_urls(AS) == [f"{AS}/.well-known/oauth-authorization-server", f"{AS}/.well-known/openid-configuration"]


def test_protected_resource_metadata_is_checked():
    url = "https://mcp.example/mcp"
    ok = check_resource({"resource": "https://MCP.example/mcp", "authorization_servers": [AS]}, url, "w")
    assert ok.authorization_servers == (AS,)
    assert check_resource({"resource": "https://mcp.example", "authorization_servers": [AS]}, url, "w")  # a parent
    bad = [
        ({"resource": "https://other.example/mcp", "authorization_servers": [AS]}, "another resource"),
        ({"resource": "https://mcp.example/mcpx", "authorization_servers": [AS]}, "another resource"),
        ({"resource": url, "authorization_servers": []}, "names no authorization server"),
        ({"resource": url, "authorization_servers": ["http://as.example"]}, "not an https URL"),
        ({"resource": url, "authorization_servers": ["http://127.0.0.1:9"]}, "not an https URL"),
        ({"resource": url, "authorization_servers": "https://as.example"}, "not a list of strings"),
        ([], "not a JSON object"),
    ]
    for doc, why in bad:
        with pytest.raises(DiscoveryError, match=why):
            check_resource(doc, url, "w")


def test_authorization_server_metadata_is_checked():
    assert check_server(META, AS, "w").token_endpoint == f"{AS}/token"
    assert check_server({**META, "issuer": AS + "/"}, AS, "w").issuer == AS + "/"  # the root, with its slash
    for doc, why in (
        ({**META, "issuer": "https://evil.example"}, "names another issuer"),
        ({k: v for k, v in META.items() if k != "token_endpoint"}, "names no token endpoint"),
        ({**META, "token_endpoint": "http://as.example/token"}, "token_endpoint is not an https URL"),
        ({**META, "token_endpoint": "https://u:p@as.example/token"}, "token_endpoint is not"),
    ):
        with pytest.raises(DiscoveryError, match=why):
            check_server(doc, AS, "w")


def test_the_scope_asked_for():
    server = check_server({**META, "scopes_supported": ["mcp", "offline_access"]}, AS, "w")
    plain = check_server(META, AS, "w")
    resource = check_resource(
        {"resource": "https://m.example/mcp", "authorization_servers": [AS], "scopes_supported": ["read", "write"]},
        "https://m.example/mcp",
        "w",
    )
    assert select_scope("files:read", resource, plain) == "files:read"  # the challenge first
    assert select_scope(None, resource, plain) == "read write"
    assert select_scope(None, None, plain) is None
    assert select_scope(None, resource, server) == "read write offline_access"
    assert select_scope(None, None, server) is None  # no scope at all: the server's default
    assert select_scope("a offline_access", None, plain) == "a"  # not listed: not asked for
    assert select_scope("a", None, server, refresh=False) == "a"
    assert select_scope("a", None, plain, asked="b a") == "a b"


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=32, max_size=96))
def test_pkce(entropy):
    pkce = grants.Pkce.from_entropy(entropy)
    assert 43 <= len(pkce.verifier) <= 128 and set(pkce.verifier) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
    )
    digest = hashlib.sha256(pkce.verifier.encode()).digest()
    assert pkce.challenge == base64.urlsafe_b64encode(digest).decode().rstrip("=")


def test_the_authorization_response_is_checked_as_rfc_9207_says():
    flagged = check_server({**META, "authorization_response_iss_parameter_supported": True}, AS, "w")
    quiet = check_server(META, AS, "w")
    assert grants.check_callback({"code": "c", "iss": AS}, flagged) == "c"
    assert grants.check_callback({"code": "c"}, quiet) == "c"
    for query, server, why in (
        ({"code": "c", "iss": "https://evil.example"}, quiet, "another issuer"),
        ({"code": "c", "iss": AS + "/"}, quiet, "another issuer"),  # no normalization
        ({"code": "c"}, flagged, "lacks the issuer"),
        ({"error": "access_denied\x1b[31m", "iss": AS}, flagged, r"\(access_denied\[31m\)"),
    ):
        with pytest.raises(grants.GrantError, match=why):
            grants.check_callback(query, server)
    with pytest.raises(grants.GrantError, match="PKCE"):
        grants.authorization_url(
            check_server({**META, "code_challenge_methods_supported": ["plain"]}, AS, "w"),
            client_id="c",
            redirect_uri="r",
            scope=None,
            state="s",
            pkce=grants.Pkce.from_entropy(b"x" * 32),
            resource="https://m.example/mcp",
        )


@settings(max_examples=500, deadline=None)
@given(
    st.integers(min_value=100, max_value=599),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(["access_token", "token_type", "refresh_token", "expires_in", "scope", "error"]),
                c,
                max_size=5,
            )
        ),
        max_leaves=10,
    ),
)
def test_any_token_answer_is_tokens_or_one_line(status, doc):
    try:
        tokens = grants.read_tokens(status, json.dumps(doc).encode(), what="the refresh", asked_scope="s")
    except grants.GrantError as exc:
        assert "\n" not in str(exc)
        return
    assert status == 200 and tokens.token_type == "Bearer"
    assert all(0x20 < ord(c) < 0x7F for c in tokens.access_token)  # it goes into a header as it is


def test_token_answers():
    ok = grants.read_tokens(
        200, b'{"access_token":"a","token_type":"bearer","expires_in":"60"}', what="x", asked_scope="s"
    )
    assert (ok.access_token, ok.expires_in, ok.scope, ok.refresh_token) == ("a", 60, "s", None)
    for body in (
        b'{"access_token":"a\\r\\nX: y","token_type":"Bearer"}',
        b'{"access_token":"a","token_type":"mac"}',
        b'{"access_token":"a","token_type":"Bearer","expires_in":-1}',
        b"[]",
        b"not json",
    ):
        with pytest.raises(grants.GrantError):
            grants.read_tokens(200, body, what="x", asked_scope=None)
    with pytest.raises(grants.GrantError, match=r"\(HTTP 400, invalid_grant\)") as caught:
        grants.read_tokens(
            400,
            b'{"error":"invalid_grant","error_description":"\\u001b]8;;evil"}',
            what="the refresh",
            asked_scope=None,
        )
    assert "evil" not in str(caught.value)


def test_the_method_a_client_authenticates_with():
    creds = clientauth.Credentials
    default = check_server(META, AS, "w")
    post_only = check_server({**META, "token_endpoint_auth_methods_supported": ["client_secret_post"]}, AS, "w")
    assert clientauth.choose_method(creds("c", "s"), default) == clientauth.BASIC
    assert clientauth.choose_method(creds("c", "s"), post_only) == clientauth.POST
    assert clientauth.choose_method(creds("c"), default) == clientauth.NONE
    assert clientauth.choose_method(creds("c", "s", method="client_secret_post"), default) == clientauth.POST
    with pytest.raises(clientauth.ClientAuthError, match="does not take private_key_jwt"):
        signer = clientauth.Signer(None, ("ES256",), "an EC key")
        clientauth.choose_method(creds("c", signer=signer), post_only)
    form, headers = clientauth.authenticate(creds("c", "s"), post_only, {"grant_type": "x"}, now=0, jti="j")
    assert form == {"grant_type": "x", "client_id": "c", "client_secret": "s"} and headers == {}


def test_a_stored_record_and_its_binding():
    legacy = {
        "version": 1,
        "url": "https://m.example/mcp",
        "tokens": {"access_token": "a", "token_type": "Bearer"},
        "oauth_metadata": META,
        "client_info": {"client_id": "c", "client_secret": "s", "token_endpoint_auth_method": "client_secret_post"},
    }
    stored = read(legacy, "https://m.example/mcp")
    assert stored.issuer == AS and stored.resource == "https://m.example/mcp"
    from assay.auth.flows import credentials

    assert credentials(stored.client, stored.grant, {}).method == "client_secret_post"  # as it was registered
    resource = check_resource(
        {"resource": "https://m.example/mcp", "authorization_servers": ["https://b.example", AS]},
        "https://m.example/mcp",
        "w",
    )
    check_binding(stored, resource)  # its issuer is still one of them
    moved = check_resource(
        {"resource": "https://m.example/mcp", "authorization_servers": ["https://b.example"]},
        "https://m.example/mcp",
        "w",
    )
    with pytest.raises(IssuerChanged, match="https://b.example"):
        check_binding(stored, moved)
    for bad in (
        {**legacy, "oauth_metadata": None},
        {**legacy, "issuer": "https://b.example"},
        {**legacy, "grant": {"kind": "password"}},
    ):
        with pytest.raises(RecordError):
            read(bad, "https://m.example/mcp")


async def test_a_held_lock_file_is_waited_for_then_names_its_holder(tmp_path):
    from assay.auth.locks import LockTimeout, held

    path = str(tmp_path / "x.lock")
    async with held(path, wait=1, what="logging in to A"):
        with pytest.raises(LockTimeout, match=r"logging in to A\) held x.lock for longer than 0.1 s"):
            async with held(path, wait=0.1, what="B"):
                pass
        entered = trio.Event()

        async def second() -> None:
            async with held(path, wait=5, what="B"):
                entered.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()  # it polls the lock, and waits
            assert not entered.is_set()
            nursery.cancel_scope.cancel()
    async with held(path, wait=0, what="C"):
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.text(min_size=1, max_size=30),
    st.text(max_size=30),
    st.text(min_size=1, max_size=30),
    st.sampled_from(["", "tenant=a%20b&x=1"]),
)
def test_the_authorization_url_reads_back_as_a_server_parses_its_query(client_id, scope, state, query):
    """What the authorization server reads from the URL (its query, parsed) is what assay put in,
    whatever the characters, and a query the endpoint already had is kept."""
    from urllib.parse import parse_qs, urlsplit

    endpoint = f"{AS}/authorize" + (f"?{query}" if query else "")
    server = check_server({**META, "authorization_endpoint": endpoint}, AS, "w")
    pkce = grants.Pkce.from_entropy(b"k" * 32)
    url = grants.authorization_url(
        server,
        client_id=client_id,
        redirect_uri="http://127.0.0.1:5/callback",
        scope=scope or None,
        state=state,
        pkce=pkce,
        resource="https://m.example/mcp?a=b",
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path, parts.fragment) == ("https", "as.example", "/authorize", "")
    got = parse_qs(parts.query, keep_blank_values=True)
    want = {
        "response_type": ["code"],
        "client_id": [client_id],
        "redirect_uri": ["http://127.0.0.1:5/callback"],
        "state": [state],
        "code_challenge": [pkce.challenge],
        "code_challenge_method": ["S256"],
        "resource": ["https://m.example/mcp?a=b"],
        **({"scope": [scope]} if scope else {}),
    }
    if query:
        want |= {"tenant": ["a b"], "x": ["1"]}
    assert got == want


@settings(max_examples=300, deadline=None)
@given(
    st.text(min_size=1, max_size=40).filter(lambda t: "\x00" not in t),
    st.text(max_size=30).filter(lambda t: "\x00" not in t),
)
def test_the_login_command_reads_back_as_a_shell_splits_it(path, scope):
    """The command a line names is what a POSIX shell reads (shlex as the shell's word splitting)."""
    import shlex

    from assay.auth.lines import login_command

    grant = {"kind": "client_credentials", "client_id": "robot", "secret_file": path}
    words = shlex.split(login_command("https://m.example/mcp", scope=scope or None, grant=grant))
    assert words == [
        "assay",
        "mcp",
        "auth",
        "login",
        "https://m.example/mcp",
        "--grant",
        "client-credentials",
        "--client-id",
        "robot",
        "--client-secret-file",
        path,
    ] + (["--scope", scope] if scope else [])


def test_what_a_server_names_reaches_a_terminal_printable():
    from assay.auth.lines import NeedsLogin

    assert (
        str(NeedsLogin("the server names \x1b]8;;x\x07 and \u202e")) == "the server names \\x1b]8;;x\\x07 and \\u202e"
    )
    url = "https://m.example/mcp"
    for hostile in ("https://as.example/\x9b31m", "https://as.example/\u202etxt", "https://as.example/a b"):
        with pytest.raises(DiscoveryError, match="not an https URL"):
            check_resource({"resource": url, "authorization_servers": [hostile]}, url, "w")


def test_a_tampered_record_is_refused_not_sent():
    base = {
        "version": 1,
        "url": "https://m.example/mcp",
        "oauth_metadata": META,
        "tokens": {"access_token": "a", "token_type": "Bearer"},
    }
    for bad in (
        {**base, "tokens": {"access_token": "a\r\nX-Injected: 1"}},
        {**base, "tokens": {"access_token": "a", "refresh_token": "r\x00"}},
        {**base, "expires_at": float("nan")},
        {**base, "expires_at": float("inf")},
    ):
        with pytest.raises(RecordError):
            read(bad, "https://m.example/mcp")
