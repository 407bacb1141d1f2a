"""API keys at serve's door (docs/serve.md, "Identity"): the file of hashes, the key presented
as a bearer token, and how a token is routed when both OAuth and API keys are configured."""

from __future__ import annotations

import hashlib

import pytest
from rsfakes import ISSUER, RSA, Clock, FakeFetch, oauth, token

from assay.auth.apikeys import digest_line, parse_api_keys
from assay.auth.resource_shell import open_identity
from assay.gateway.config import ApiKeys, ConfigError, ServeConfig
from assay.gateway.contract import AuthFailure

CI_KEY = "Zk9xV1cT3s0pQ2mY7uLr8eNa4bHd6jWg5iKo1fEy0cA"  # as secrets.token_urlsafe(32) makes them
OPS_KEY = "q3Rt7YwUe2Ii9Oo0Pp1Aa4Ss5Dd6Ff8Gg-Hh_Jj2Kk3"


def sha(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def test_the_file_of_hashes():
    table = parse_api_keys(
        f"# the team's keys\n\nci {sha(CI_KEY)} team=build\n  ops {sha(OPS_KEY).upper().replace('SHA256', 'sha256')}"
        " groups=ops groups=sre  \n".encode(),
        "keys.txt",
    )
    assert len(table) == 2
    ci = table.find(CI_KEY)
    assert ci is not None and ci.id == "ci" and ci.claims == {"team": "build", "sub": "ci"}
    who = ci.identity()
    assert who.key == "key:ci" and who.subject == "ci" and who.issuer is None and who.token is None
    ops = table.find(OPS_KEY)
    assert ops is not None and ops.claims == {"groups": ["ops", "sre"], "sub": "ops"}
    assert table.find(CI_KEY + "x") is None
    assert table.find("") is None
    assert CI_KEY not in repr(ci) and sha(CI_KEY)[7:] not in repr(ci)


def test_the_line_of_a_key_is_what_sha256sum_gives():
    assert digest_line("ci", CI_KEY) == f"ci {sha(CI_KEY)}"


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (f"ci {sha(CI_KEY)}\nci {sha(OPS_KEY)}\n", ["k:2: the id ci is already on line 1"]),
        (f"ci {sha(CI_KEY)}\nbuild {sha(CI_KEY)}\n", ["k:2: the same key as line 1 (one key, one id)"]),
        ("ci\n", ["k:1: expected `<id> sha256:<hex> [claim=value ...]`"]),
        (f"ci {CI_KEY}\n", ["k:1: the second field must be sha256: and 64 hex digits"]),
        (f"-ci {sha(CI_KEY)}\n", ["k:1: the id must match [A-Za-z0-9][A-Za-z0-9._@-]{0,63}"]),
        (f"ci {sha(CI_KEY)} team\n", ["k:1: a claim must be name=value (name: letters, digits, _ . : -)"]),
        (f"ci {sha(CI_KEY)} sub=root\n", ["k:1: the claim sub is the key's id and cannot be set"]),
        ("# nothing\n", ["k: no key"]),
        (b"\xff", ["k: not UTF-8 text"]),
        (
            f"ci {sha(CI_KEY)}\nx\nci {sha(OPS_KEY)}\n",
            ["k:2: expected `<id> sha256:<hex> [claim=value ...]`", "k:3: the id ci is already on line 1"],
        ),
    ],
)
def test_problems_of_the_file_one_line_each(text, problems):
    with pytest.raises(ConfigError) as caught:
        parse_api_keys(text if isinstance(text, bytes) else text.encode(), "k")
    assert caught.value.problems == problems
    for problem in caught.value.problems:
        assert CI_KEY not in problem and sha(CI_KEY)[7:] not in problem


def config(tmp_path, **over) -> ServeConfig:
    (tmp_path / "keys").write_text(f"ci {sha(CI_KEY)} team=build\n")
    values = {"base_dir": str(tmp_path), "policy": "p.yaml", "upstreams": (), "api_keys": ApiKeys("keys")}
    values.update(over)
    return ServeConfig(**values)


async def test_keys_alone(tmp_path):
    ident = await open_identity(config(tmp_path))
    assert (await ident(f"Bearer {CI_KEY}")).key == "key:ci"
    assert ident.metadata is None
    for value, reason in (
        (f"Bearer {OPS_KEY}", "the API key is not known"),
        (None, "no bearer token"),
        (f"Bearer {token()}", "the API key is not known"),
    ):
        with pytest.raises(AuthFailure) as caught:
            await ident(value)
        assert caught.value.status == 401 and caught.value.reason == reason
        assert caught.value.www_authenticate.startswith("Bearer ")
        assert 'realm="assay"' in caught.value.www_authenticate
        assert (value or "x") not in caught.value.reason
    assert ident.describe() == "identity: API keys (1)"


async def test_a_jwt_goes_to_oauth_any_other_token_to_the_keys(tmp_path):
    fetch = FakeFetch()
    ident = await open_identity(config(tmp_path, oauth=oauth()), fetch=fetch, clock=Clock())
    assert (await ident(f"Bearer {CI_KEY}")).key == "key:ci"
    assert (await ident(f"Bearer {token(RSA)}")).key == f"user:{ISSUER}#alice"
    with pytest.raises(AuthFailure) as caught:
        await ident("Bearer a.b.c")
    assert caught.value.reason == "the token's header is not base64url JSON"
    assert 'resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"' in (
        caught.value.www_authenticate
    )
    assert ident.describe() == f"identity: OAuth (issuer {ISSUER}) and API keys (1)"


def test_the_example_of_the_docs_is_a_valid_file():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text(encoding="utf-8")
    section = page.split("### API keys (`identity.api_keys`)", 1)[1]
    lines = [line[4:] for line in section.split("\n\n")[2].splitlines()]
    table = parse_api_keys("\n".join(lines).encode(), "serve.md")
    ci = table.find("test")
    assert ci is not None and ci.claims == {"team": "build", "sub": "ci"}
    assert [key.id for key in table.keys] == ["ci", "dana"]
