"""Bearer JWTs at serve's door (docs/serve.md, "Identity"): what is accepted, what is refused and
how the refusal reads, with keys made in the test and the key set fetched in memory."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc.jwk import ECKey
from rsfakes import EC, ISSUER, NOW, RESOURCE, ROTATED, RSA, Clock, FakeFetch, b64, oauth, token, unsigned

from assay.auth.jwks import KeySetCache
from assay.auth.resource import (
    Challenger,
    TokenVerifier,
    bearer_token,
    metadata_url,
    oauth_problems,
    resource_metadata,
)
from assay.auth.resource_shell import Identifier, open_identity
from assay.gateway.config import ApiKeys, ConfigError, ServeConfig
from assay.gateway.contract import AuthFailure, Identity

META = "https://gw.example/.well-known/oauth-protected-resource/mcp"


def config(**over) -> ServeConfig:
    values = {"base_dir": "/", "policy": "p.yaml", "upstreams": (), "oauth": oauth()}
    values.update(over)
    return ServeConfig(**values)


async def identifier(fetch: FakeFetch | None = None, clock: Clock | None = None, **over) -> Identifier:
    return await open_identity(
        config(**over), fetch=fetch or FakeFetch(), clock=clock or Clock(), cache=KeySetCache(refetch_interval=30)
    )


async def refused(ident: Identifier, value: str | None) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        await ident(value)
    failure = caught.value
    if value:
        secret = value.split(" ", 1)[-1]
        for text in (failure.reason, failure.www_authenticate, str(failure)):
            assert secret not in text
            for part in secret.split("."):
                assert len(part) < 8 or part not in text
    return failure


async def test_a_good_token_is_the_user_of_its_issuer_and_subject():
    ident = await identifier()
    for signed in (token(RSA), token(EC), token(RSA, alg="RS256", aud=["other", RESOURCE])):
        who = await ident(f"Bearer {signed}")
        assert who.key == f"user:{ISSUER}#alice"
        assert who.subject == "alice" and who.issuer == ISSUER
        assert who.claims["sub"] == "alice"
        assert who.token == signed
    assert (await ident(f"bearer   {token(EC)} ")).subject == "alice"


async def test_scopes_from_scope_or_scp():
    ident = await identifier(oauth=oauth(scopes=("mcp:tools",)))
    assert (await ident("Bearer " + token(scope="openid mcp:tools"))).scopes == {"openid", "mcp:tools"}
    assert (await ident("Bearer " + token(scp=["mcp:tools", 7]))).scopes == {"mcp:tools"}
    assert (await ident("Bearer " + token(scp="mcp:tools x"))).scopes == {"mcp:tools", "x"}


@pytest.mark.parametrize(
    ("signed", "reason"),
    [
        (lambda: token(exp=NOW - 31), "the token has expired"),
        (lambda: token(exp=None), "the token has no expiry (exp)"),
        (lambda: token(exp="soon"), "the token has no expiry (exp)"),
        (lambda: token(nbf=NOW + 31), "the token is not valid yet (nbf)"),
        (lambda: token(iss="https://evil.example"), f"the token is not from the issuer {ISSUER}"),
        (lambda: token(iss=ISSUER + "/"), f"the token is not from the issuer {ISSUER}"),
        (lambda: token(aud="https://gw.example/other"), f"the token's audience does not hold {RESOURCE}"),
        (lambda: token(aud=None), f"the token's audience does not hold {RESOURCE}"),
        (lambda: token(sub=None), "the token has no subject (sub)"),
        (lambda: token(sub=""), "the token has no subject (sub)"),
        (lambda: token(RSA, alg="RS384"), "the token's algorithm is not one of ES256, RS256"),
        (lambda: unsigned({"alg": "RS256", "crit": ["x"], "x": 1}, {}), "the token's header has critical extensions"),
        (lambda: token(RSA)[:-4] + "AAAA", "the token's signature does not verify"),
        (
            lambda: token(ECKey.generate_key("P-256", parameters={"kid": "rsa-1"})),
            "no key of the issuer matches the token",
        ),
        (lambda: "x.y.z", "the token's header is not base64url JSON"),
        (lambda: b64(b"[1]") + ".e30.", "the token's header is not a JSON object"),
        (lambda: b64(b'{"alg":"RS256","alg":"RS256"}') + ".e30.", "the token's header is not base64url JSON"),
        (lambda: unsigned({"alg": "RS256", "kid": 7}, {}), "the token's key id is not a string"),
        (lambda: "a.b.c.d.e", "the token is not a JWT"),
        (lambda: token() + "A" * 17000, "the token is too long"),
    ],
)
async def test_refused_tokens_say_why_and_never_echo_the_token(signed, reason):
    ident = await identifier()
    failure = await refused(ident, "Bearer " + signed())
    assert failure.status == 401
    assert failure.reason == reason
    assert failure.www_authenticate == f'Bearer error="invalid_token", resource_metadata="{META}"'


async def test_leeway_lets_a_little_clock_skew_pass():
    ident = await identifier()
    assert (await ident("Bearer " + token(exp=NOW - 29, nbf=NOW + 29))).subject == "alice"


async def test_alg_none_is_refused():
    ident = await identifier()
    for alg in ("none", "None", "NONE"):
        forged = unsigned({"alg": alg, "kid": "rsa-1"}, {"iss": ISSUER, "aud": RESOURCE, "sub": "x", "exp": NOW + 60})
        assert (await refused(ident, "Bearer " + forged)).reason.startswith("the token's algorithm is not one of")


async def test_hs256_signed_with_the_public_key_is_refused():
    """The classic confusion: the issuer's public key (PEM or JWK bytes) as an HMAC secret."""
    ident = await identifier(oauth=oauth(algorithms=("RS256", "ES256")))
    body = {"iss": ISSUER, "aud": RESOURCE, "sub": "mallory", "exp": NOW + 60}
    for secret in (RSA.as_pem(private=False), json.dumps(RSA.as_dict(private=False)).encode()):
        head = b64(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode())
        payload = b64(json.dumps(body).encode())
        sig = hmac.new(secret, f"{head}.{payload}".encode(), hashlib.sha256).digest()
        failure = await refused(ident, f"Bearer {head}.{payload}.{b64(sig)}")
        assert failure.reason == "the token's algorithm is not one of ES256, RS256"
    # and the verifier never accepts HS* even where a config lists it (the config check refuses it)
    verifier = TokenVerifier(oauth(algorithms=("HS256", "RS256")))
    assert verifier.algorithms == {"RS256"}
    assert "identity.oauth.algorithms: 'HS256' is not allowed" in oauth_problems(oauth(algorithms=("HS256",)))[0]
    assert oauth_problems(oauth(algorithms=("none",)))


async def test_a_key_that_names_another_algorithm_is_not_used():
    key = ECKey.import_key(EC.as_dict(private=True), parameters={"kid": "ec-1", "alg": "ES384"})
    fetch = FakeFetch(keys=[key])
    ident = await identifier(fetch)
    assert (await refused(ident, "Bearer " + token(EC))).reason == "no key of the issuer matches the token"


async def test_missing_scope_is_403_insufficient_scope():
    ident = await identifier(oauth=oauth(scopes=("mcp:tools", "mcp:admin")))
    failure = await refused(ident, "Bearer " + token(scope="mcp:tools"))
    assert failure.status == 403
    assert failure.reason == "the token lacks the scope mcp:admin"
    assert failure.www_authenticate == (
        f'Bearer error="insufficient_scope", resource_metadata="{META}", scope="mcp:tools mcp:admin"'
    )


async def test_no_token_is_401_with_the_metadata_and_scope():
    ident = await identifier(oauth=oauth(scopes=("mcp:tools",)))
    for value in (None, "", "Basic dXNlcjpwYXNz"):
        failure = await refused(ident, value)
        assert failure.status == 401
        assert failure.www_authenticate == f'Bearer resource_metadata="{META}", scope="mcp:tools"'
    assert (await refused(ident, "Bearer a b")).reason == "the bearer token is malformed"


async def test_unknown_kid_is_fetched_again_once_then_refused():
    fetch, clock = FakeFetch(keys=[RSA]), Clock()
    ident = await identifier(fetch, clock)
    assert fetch.calls == 1
    clock.now += 31
    fetch.keys = [RSA, ROTATED]  # the issuer rotated: the new key is fetched on first sight
    assert (await ident("Bearer " + token(ROTATED))).subject == "alice"
    assert fetch.calls == 2
    clock.now += 31
    stranger = ECKey.generate_key("P-256", parameters={"kid": "nobody"})
    assert (await refused(ident, "Bearer " + token(stranger))).reason == "no key of the issuer matches the token"
    assert fetch.calls == 3  # one fetch for that kid, then the refusal
    assert (await refused(ident, "Bearer " + token(stranger))).reason == "no key of the issuer matches the token"
    assert fetch.calls == 3


async def test_a_flood_of_random_kids_costs_one_fetch_per_interval():
    fetch, clock = FakeFetch(), Clock()
    ident = await identifier(fetch, clock)
    clock.now += 60
    keys = [ECKey.generate_key("P-256", parameters={"kid": f"k{i}"}) for i in range(40)]
    signed = [token(key, exp=NOW + 3600) for key in keys]
    results: list[str] = []

    async def one(value: str) -> None:
        try:
            await ident("Bearer " + value)
        except AuthFailure as failure:
            results.append(failure.reason)

    async with trio.open_nursery() as nursery:
        for value in signed[:20]:
            nursery.start_soon(one, value)
    assert fetch.calls == 2
    clock.now += 10
    for value in signed[20:]:
        await one(value)
    assert fetch.calls == 2
    clock.now += 21
    await one(signed[0])
    assert fetch.calls == 3
    assert set(results) == {"no key of the issuer matches the token"} and len(results) == 41


async def test_keys_are_kept_for_max_age_within_bounds_and_kept_while_refetch_fails():
    fetch, clock = FakeFetch(cache_control="public, max-age=120"), Clock()
    ident = await identifier(fetch, clock)
    ident.verified = None  # about the key set: every request's token is checked against it
    clock.now += 119
    await ident("Bearer " + token(exp=NOW + 3600))
    assert fetch.calls == 1
    clock.now += 1
    fetch.fail = True
    await ident("Bearer " + token(exp=NOW + 3600))  # the refetch fails: the old keys still verify
    assert fetch.calls == 2
    assert ident.source is not None and ident.source.cache.failure is not None
    await ident("Bearer " + token(exp=NOW + 3600))
    assert fetch.calls == 2  # a failed fetch is not retried before the interval
    clock.now += 30
    fetch.fail = False
    fetch.cache_control = "max-age=999999999"
    await ident("Bearer " + token(exp=NOW + 10**6))
    assert fetch.calls == 3 and ident.source.cache.failure is None
    clock.now += 86400 - 1
    await ident("Bearer " + token(exp=NOW + 10**6))
    assert fetch.calls == 3
    clock.now += 1
    await ident("Bearer " + token(exp=NOW + 10**6))
    assert fetch.calls == 4  # a day at most


async def test_no_key_set_at_start_is_503_until_one_is_fetched():
    fetch, clock = FakeFetch(fail=True), Clock()
    warned: list[str] = []
    ident = await open_identity(config(), fetch=fetch, clock=clock, warn=warned.append)
    assert warned and "requests with a token are refused" in warned[0]
    failure = await refused(ident, "Bearer " + token())
    assert failure.status == 503 and failure.reason == "the issuer's keys are not available"
    assert fetch.calls == 1
    clock.now += 30
    fetch.fail = False
    assert (await ident("Bearer " + token(exp=NOW + 60))).subject == "alice"
    assert fetch.calls == 2


def test_metadata_document_and_its_well_known_url():
    assert metadata_url("https://gw.example/mcp") == META
    assert metadata_url("https://gw.example:8443/team/mcp/") == (
        "https://gw.example:8443/.well-known/oauth-protected-resource/team/mcp"
    )
    assert metadata_url("https://gw.example") == "https://gw.example/.well-known/oauth-protected-resource"
    assert resource_metadata(oauth(scopes=("mcp:tools",))) == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["mcp:tools"],
        "bearer_methods_supported": ["header"],
    }
    assert resource_metadata(oauth(authorization_servers=("https://as.example",)))["authorization_servers"] == [
        "https://as.example"
    ]


def test_config_problems_of_oauth():
    assert oauth_problems(oauth()) == []
    assert oauth_problems(oauth(issuer="http://127.0.0.1:9000", jwks_url="http://localhost:9000/jwks")) == []
    problems = oauth_problems(
        oauth(jwks_url="http://issuer.example/jwks", audience="https://gw.example/mcp#x", scopes=('a"b',), leeway_s=-1)
    )
    assert problems == [
        "identity.oauth.jwks_url: must be an https URL (http only on a loopback host)",
        "identity.oauth.audience: the URL has a fragment",
        "identity.oauth.scopes: 'a\"b' is not a scope token",
        "identity.oauth.leeway: must be between 0 and 10 minutes",
    ]


async def test_open_identity_refuses_no_auth_off_loopback_and_nothing_configured():
    with pytest.raises(ConfigError) as caught:
        await open_identity(config(oauth=None, no_auth=True, listen="0.0.0.0:8787"))
    assert caught.value.problems[0].startswith(
        "identity.none: no authentication is only allowed on a loopback address, not 0.0.0.0"
    )
    with pytest.raises(ConfigError):
        await open_identity(config(oauth=None))
    ident = await open_identity(config(oauth=None, no_auth=True, listen="[::1]:8787"))
    assert await ident("Bearer whatever") == Identity(key="anonymous", subject="anonymous")
    assert "no authentication" in ident.describe()


async def test_api_key_file_problems_are_config_errors(tmp_path):
    (tmp_path / "keys").write_text("ci sha256:zz\n")
    with pytest.raises(ConfigError) as caught:
        await open_identity(config(base_dir=str(tmp_path), api_keys=ApiKeys("keys")), fetch=FakeFetch())
    assert caught.value.problems == [f"{tmp_path}/keys:1: the second field must be sha256: and 64 hex digits"]
    with pytest.raises(ConfigError) as caught:
        await open_identity(config(base_dir=str(tmp_path), api_keys=ApiKeys("missing")), fetch=FakeFetch())
    assert caught.value.problems[0].startswith("identity.api_keys: ")


def test_bearer_token_reading():
    challenger = Challenger()
    assert bearer_token("Bearer abc.def-_~+/==", challenger) == "abc.def-_~+/=="
    assert bearer_token("BEARER  x ", challenger) == "x"
    for bad in ("Bearer", "Bearer ", "Bearer a=b", "Bearer \u00e9", "Bearer\tx"):
        with pytest.raises(AuthFailure):
            bearer_token(bad, challenger)


_header_text = st.one_of(
    st.none(),
    st.text(max_size=80),
    st.builds(lambda s: "Bearer " + s, st.text(alphabet=st.characters(codec="ascii"), max_size=80)),
    st.builds(
        lambda a, b, c: f"Bearer {a}.{b}.{c}",
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=60),
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=60),
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", max_size=60),
    ),
    st.builds(
        lambda head, body: "Bearer " + unsigned(head, body, b"sig"),
        st.dictionaries(
            st.sampled_from(["alg", "kid", "typ", "crit"]),
            st.one_of(st.text(max_size=8), st.integers(), st.sampled_from(["RS256", "ES256", "none", "rsa-1", "ec-1"])),
        ),
        st.dictionaries(
            st.sampled_from(["iss", "aud", "sub", "exp", "nbf", "scope"]),
            st.one_of(st.text(max_size=8), st.floats(), st.integers()),
        ),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_header_text)
def test_any_authorization_header_is_an_identity_or_an_auth_failure(value):
    async def main() -> None:
        ident = await identifier()
        try:
            await ident(value)
        except AuthFailure as failure:
            assert failure.status in (401, 403)
            assert "\n" not in failure.reason
            if value and len(value) > 20:
                assert value.split(" ", 1)[-1] not in failure.reason

    trio.run(main)


async def test_a_verified_token_is_checked_once_and_served_until_it_expires(monkeypatch):
    from assay.auth import resource

    clock = Clock()
    ident = await identifier(clock=clock)
    verifies = []
    real = resource.TokenVerifier.verify

    def counting(self, *args, **kwargs):
        verifies.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(resource.TokenVerifier, "verify", counting)
    signed = token(exp=NOW + 100)
    for _ in range(3):
        assert (await ident("Bearer " + signed)).subject == "alice"
    assert len(verifies) == 1
    # another token of the same user is checked on its own
    assert (await ident("Bearer " + token(exp=NOW + 101))).subject == "alice" and len(verifies) == 2
    # past exp plus the leeway (30 s), the kept one is refused as a new one would be
    clock.now = NOW + 100 + 30
    failure = await refused(ident, "Bearer " + signed)
    assert failure.reason == "the token has expired" and len(verifies) == 3


async def test_a_token_not_valid_yet_is_never_served_from_what_was_kept():
    from assay.auth.resource_shell import VerifiedTokens

    kept = VerifiedTokens(max_entries=2, max_bytes=10_000)
    who = Identity(key="user:i#a", subject="a", claims={"exp": NOW + 100, "nbf": NOW})
    kept.put("t1", who)
    assert kept.get("t1", NOW - 31, 30) is None and len(kept) == 0  # before nbf - leeway: dropped
    kept.put("t1", who)
    kept.put("t2", who)
    kept.put("t3", who)  # over the entries bound: the oldest goes
    assert kept.get("t1", NOW, 30) is None and kept.get("t3", NOW, 30) is who and len(kept) == 2
    big = VerifiedTokens(max_entries=10, max_bytes=10)
    big.put("x" * 6, who)
    big.put("y" * 6, who)  # over the bytes bound
    assert len(big) == 1 and big.get("y" * 6, NOW, 30) is who
