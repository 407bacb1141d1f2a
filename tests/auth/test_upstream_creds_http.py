"""Serve's credentials to upstreams over real HTTP on 127.0.0.1 (docs/serve.md, "Credentials to
upstreams"): a token endpoint and a protected upstream, both served by hypercorn in the test's
own trio run, each recording what it was sent. The auth under test is the one
:func:`assay.auth.upstream_auth.auth_for_upstream` gives, on an HTTP client of the upstream_http
shell, as the gateway uses it."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

import pytest
import trio
import trio.testing

from assay.auth.upstream_auth import UpstreamTokens, auth_for_upstream
from assay.auth.upstream_creds import ACCESS_TOKEN_TYPE, UpstreamCredError
from assay.gateway.config import ClientCredentials, Secret, StaticHeader, TokenExchange, Upstream
from assay.gateway.contract import Identity
from assay.shells.upstream_http.client import http_client

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ALICE = Identity(key="user:https://idp#alice", subject="alice", token="alice-own-token-AAAA")
BOB = Identity(key="user:https://idp#bob", subject="bob", token="bob-own-token-BBBB")


class Servers:
    """The token endpoint (POST /token) and the upstream (/mcp), on one port."""

    def __init__(self) -> None:
        self.base = ""
        self.token_requests: list[tuple[dict[str, str], dict[str, str]]] = []  # (headers, form)
        self.upstream_requests: list[dict[str, str]] = []  # headers
        self.valid: set[str] = set()  # Authorization (or X-Api-Key) values the upstream takes
        self.lifetime: Any = 60
        self.token_answer: tuple[int, bytes] | None = None  # a fixed answer instead of a token
        self.gate: trio.Event | None = None  # the token endpoint waits for it
        self.issued = 0
        self.refuse = False  # the upstream refuses every credential
        self.refusal = b"{}"  # the body of the upstream's 401

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] == "/token":
            status, answer = await self.token(headers, dict(parse_qsl(body.decode())))
        else:
            self.upstream_requests.append(headers)
            given = headers.get("authorization") or headers.get("x-api-key")
            ok = given in self.valid and not self.refuse
            status, answer = (200, b'{"ok": true}') if ok else (401, self.refusal)
        length = str(len(answer)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", length)],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    async def token(self, headers: dict[str, str], form: dict[str, str]) -> tuple[int, bytes]:
        self.token_requests.append((headers, form))
        if self.gate is not None:
            await self.gate.wait()
        if self.token_answer is not None:
            return self.token_answer
        self.issued += 1
        if form.get("grant_type") == "client_credentials":
            token = f"cc-{self.issued}"
            doc: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime}
        else:
            token = f"ex-{form['subject_token'][:5]}-{self.issued}"
            doc = {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.lifetime,
                "issued_token_type": ACCESS_TOKEN_TYPE,
            }
        self.valid.add(f"Bearer {token}")
        return 200, json.dumps(doc).encode()


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def servers(nursery):
    from hypercorn.config import Config
    from hypercorn.trio import serve

    app = Servers()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    binds = await nursery.start(lambda task_status: serve(app, config, task_status=task_status, mode="asgi"))
    app.base = binds[0]
    return app


@pytest.fixture
async def client():
    async with http_client({}) as c:
        yield c


@pytest.fixture
async def tokens():
    clock = Clock()
    async with UpstreamTokens(environ={}, now=clock) as t:
        t.clock = clock  # type: ignore[attr-defined]
        yield t


def _basic(headers: dict[str, str]) -> tuple[str, str]:
    scheme, _, blob = headers["authorization"].partition(" ")
    assert scheme == "Basic"
    cid, _, secret = base64.b64decode(blob).decode().partition(":")
    return unquote_plus(cid), unquote_plus(secret)


def _upstream(servers: Servers, credential: Any) -> Upstream:
    return Upstream(name="docs", url=f"{servers.base}/mcp", credential=credential)


async def test_a_static_header_is_sent_from_its_secret(servers, client, tokens, tmp_path):
    (tmp_path / "key").write_text("k-123\n")
    up = _upstream(servers, StaticHeader("X-Api-Key", Secret(file="key"), prefix="Key "))
    auth = auth_for_upstream(up, ALICE, base_dir=str(tmp_path), environ={}, cache=tokens)
    servers.valid.add("Key k-123")
    for _ in range(2):
        assert (await client.post(up.url, auth=auth, content=b"{}")).status_code == 200
    assert [h["x-api-key"] for h in servers.upstream_requests] == ["Key k-123", "Key k-123"]
    assert all(ALICE.token not in v for h in servers.upstream_requests for v in h.values())
    servers.valid.clear()
    with pytest.raises(UpstreamCredError, match=r"^upstream docs refused its credential \(HTTP 401"):
        await client.post(up.url, auth=auth, content=b"{}")
    none = auth_for_upstream(Upstream(name="open", url=up.url), ALICE, base_dir="/", environ={}, cache=tokens)
    assert none is None


async def test_a_static_header_secret_missing_is_one_line(servers, client, tokens, tmp_path):
    up = _upstream(servers, StaticHeader("Authorization", Secret(env="UP_KEY"), prefix="Bearer "))
    auth = auth_for_upstream(up, ALICE, base_dir=str(tmp_path), environ={}, cache=tokens)
    with pytest.raises(UpstreamCredError, match=r"^upstream docs: the environment variable UP_KEY is not set$"):
        await client.post(up.url, auth=auth, content=b"{}")
    assert servers.upstream_requests == []
    bad = auth_for_upstream(up, ALICE, base_dir=str(tmp_path), environ={"UP_KEY": "a\nb"}, cache=tokens)
    with pytest.raises(UpstreamCredError, match="holds characters a header cannot carry"):
        await client.post(up.url, auth=bad, content=b"{}")


async def test_client_credentials_fetched_once_cached_and_refetched_after_expiry(servers, client, tokens):
    cred = ClientCredentials(
        f"{servers.base}/token", "gateway", Secret(env="CC_SECRET"), scope="read", audience="docs-api"
    )
    up = _upstream(servers, cred)
    env = {"CC_SECRET": "cc-secret-value"}
    # one token for the gateway: the same for every user
    auth_a = auth_for_upstream(up, ALICE, base_dir="/", environ=env, cache=tokens)
    auth_b = auth_for_upstream(up, BOB, base_dir="/", environ=env, cache=tokens)
    assert (await client.post(up.url, auth=auth_a, content=b"{}")).status_code == 200
    assert (await client.post(up.url, auth=auth_b, content=b"{}")).status_code == 200
    assert len(servers.token_requests) == 1
    headers, form = servers.token_requests[0]
    assert form == {"grant_type": "client_credentials", "scope": "read", "audience": "docs-api"}
    assert _basic(headers) == ("gateway", "cc-secret-value")
    assert [h["authorization"] for h in servers.upstream_requests] == ["Bearer cc-1", "Bearer cc-1"]
    tokens.clock.t += 53.9  # 60 s, dropped 6 s early
    await client.post(up.url, auth=auth_a, content=b"{}")
    assert len(servers.token_requests) == 1
    tokens.clock.t += 0.1
    await client.post(up.url, auth=auth_a, content=b"{}")
    assert len(servers.token_requests) == 2
    assert servers.upstream_requests[-1]["authorization"] == "Bearer cc-2"


async def test_token_exchange_per_user_and_the_user_token_never_reaches_the_upstream(servers, client, tokens, tmp_path):
    (tmp_path / "secret").write_text("te-secret\n")
    cred = TokenExchange(f"{servers.base}/token", "gw-client", Secret(file="secret"), audience="https://docs.example")
    up = _upstream(servers, cred)
    auth_a = auth_for_upstream(up, ALICE, base_dir=str(tmp_path), environ={}, cache=tokens)
    auth_b = auth_for_upstream(up, BOB, base_dir=str(tmp_path), environ={}, cache=tokens)
    for auth in (auth_a, auth_b, auth_a, auth_b):
        assert (await client.post(up.url, auth=auth, content=b"{}")).status_code == 200
    seen = [h["authorization"] for h in servers.upstream_requests]
    assert seen == ["Bearer ex-alice-1", "Bearer ex-bob-o-2", "Bearer ex-alice-1", "Bearer ex-bob-o-2"]
    assert len(servers.token_requests) == 2
    for (headers, form), who in zip(servers.token_requests, (ALICE, BOB), strict=True):
        assert form == {
            "grant_type": EXCHANGE,
            "subject_token": who.token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "audience": "https://docs.example",
        }
        assert _basic(headers) == ("gw-client", "te-secret")
    for headers in servers.upstream_requests:
        for value in headers.values():
            assert ALICE.token not in value and BOB.token not in value
            assert "AAAA" not in value and "BBBB" not in value and "te-secret" not in value


async def test_concurrent_requests_of_one_user_make_one_token_request(servers, client, tokens):
    cred = TokenExchange(f"{servers.base}/token", "gw", Secret(env="S"), audience="aud")
    up = _upstream(servers, cred)
    auth = auth_for_upstream(up, ALICE, base_dir="/", environ={"S": "s"}, cache=tokens)
    servers.gate = trio.Event()
    statuses: list[int] = []

    async def call() -> None:
        statuses.append((await client.post(up.url, auth=auth, content=b"{}")).status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(call)
        await trio.testing.wait_all_tasks_blocked()
        assert len(servers.token_requests) == 1
        servers.gate.set()
    assert statuses == [200] * 5 and len(servers.token_requests) == 1


async def test_a_401_gets_one_fresh_token_and_one_retry_then_the_error(servers, client, tokens):
    cred = TokenExchange(f"{servers.base}/token", "gw", Secret(env="S"), audience="aud")
    up = _upstream(servers, cred)
    auth = auth_for_upstream(up, ALICE, base_dir="/", environ={"S": "s"}, cache=tokens)
    assert (await client.post(up.url, auth=auth, content=b'{"n": 1}')).status_code == 200
    servers.valid.clear()  # the upstream no longer takes ex-alice-1
    answer = await client.post(up.url, auth=auth, content=b'{"n": 2}')
    assert answer.status_code == 200
    assert len(servers.token_requests) == 2
    assert [h["authorization"] for h in servers.upstream_requests] == [
        "Bearer ex-alice-1",
        "Bearer ex-alice-1",
        "Bearer ex-alice-2",
    ]
    # the fresh token is the one kept
    await client.post(up.url, auth=auth, content=b"{}")
    assert servers.upstream_requests[-1]["authorization"] == "Bearer ex-alice-2"
    assert len(servers.token_requests) == 2
    # an upstream that refuses every token: one refresh, one retry, then the one-line error
    servers.refuse = True
    with pytest.raises(UpstreamCredError, match=r"^upstream docs refused a fresh token too \(HTTP 401\)$"):
        await client.post(up.url, auth=auth, content=b"{}")
    assert len(servers.token_requests) == 3
    assert len(servers.upstream_requests) == 6
    servers.refuse = False  # the token refused twice is not kept: the next request asks again
    assert (await client.post(up.url, auth=auth, content=b"{}")).status_code == 200
    assert len(servers.token_requests) == 4
    assert servers.upstream_requests[-1]["authorization"] == "Bearer ex-alice-4"
    # a refusal whose body says it is long is not read whole for a retry
    servers.refuse = True
    servers.refusal = b" " * (64 * 1024 + 1)
    with pytest.raises(UpstreamCredError, match=r"^upstream docs refused the token \(HTTP 401, with a body over 65536"):
        await client.post(up.url, auth=auth, content=b"{}")
    assert len(servers.token_requests) == 4


async def test_a_token_endpoint_refusal_is_one_line_naming_the_error_never_a_secret(servers, client, tokens):
    cred = TokenExchange(f"{servers.base}/token", "gw", Secret(env="S"), audience="aud")
    up = _upstream(servers, cred)
    auth = auth_for_upstream(up, ALICE, base_dir="/", environ={"S": "client-secret-S"}, cache=tokens)
    servers.token_answer = (
        400,
        json.dumps({"error": "invalid_target", "error_description": f"no audience for {ALICE.token}\r\n"}).encode(),
    )
    with pytest.raises(UpstreamCredError) as err:
        await client.post(up.url, auth=auth, content=b"{}")
    assert str(err.value) == (
        "the token endpoint refused the token exchange for upstream docs (HTTP 400, invalid_target: no audience for [hidden])"
    )
    assert servers.upstream_requests == []
    servers.token_answer = (200, b'{"access_token": "t", "token_type": "Bearer", "expires_in": 60}')
    with pytest.raises(UpstreamCredError, match="issued_token_type must be"):
        await client.post(up.url, auth=auth, content=b"{}")
    servers.token_answer = (200, b" " * (64 * 1024 + 1))
    with pytest.raises(UpstreamCredError, match=r"answer to the token exchange for upstream docs is too long"):
        await client.post(up.url, auth=auth, content=b"{}")
    assert servers.upstream_requests == []


async def test_a_token_endpoint_late_or_unreachable(servers, client):
    async with UpstreamTokens(environ={}, timeout=0.2) as tokens:
        cred = ClientCredentials(f"{servers.base}/token", "gw", Secret(env="S"))
        auth = auth_for_upstream(_upstream(servers, cred), ALICE, base_dir="/", environ={"S": "s"}, cache=tokens)
        servers.gate = trio.Event()  # never set: the endpoint does not answer
        with pytest.raises(
            UpstreamCredError, match=r"no answer from the token endpoint http://127\.0\.0\.1:\d+ within 0\.2 s$"
        ):
            await client.post(f"{servers.base}/mcp", auth=auth, content=b"{}")
        with trio.socket.socket() as sock:  # a port nothing listens on
            await sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            cred = ClientCredentials(f"http://127.0.0.1:{port}/token", "gw", Secret(env="S"))
            auth = auth_for_upstream(_upstream(servers, cred), ALICE, base_dir="/", environ={"S": "s"}, cache=tokens)
            with pytest.raises(
                UpstreamCredError, match=r"cannot reach the token endpoint http://127\.0\.0\.1:\d+ \(ConnectError\)$"
            ):
                await client.post(f"{servers.base}/mcp", auth=auth, content=b"{}")
        assert servers.upstream_requests == []


async def test_token_exchange_needs_the_user_token(servers, tokens):
    cred = TokenExchange(f"{servers.base}/token", "gw", Secret(env="S"), audience="aud")
    keyed = Identity(key="key:ci", subject="ci")
    with pytest.raises(
        UpstreamCredError, match=r"^upstream docs exchanges the user's token, and ci signed in without one"
    ):
        auth_for_upstream(_upstream(servers, cred), keyed, base_dir="/", environ={}, cache=tokens)


async def test_through_run_remote_a_refusal_is_the_one_line_start_error(servers, tokens):
    # as the gateway wires it: run_remote(..., auth=..., needs_login=(UpstreamCredError,))
    from assay.shells.upstream_http.connect import RemoteStartError, run_remote
    from assay.shells.upstream_http.target import Target

    cred = TokenExchange(f"{servers.base}/token", "gw", Secret(env="S"), audience="aud")
    up = _upstream(servers, cred)
    auth = auth_for_upstream(up, ALICE, base_dir="/", environ={"S": "s"}, cache=tokens)
    target = Target(up.url, "streamable-http", (), None)

    async def body(server: Any) -> str:
        return "ran"

    kw: dict[str, Any] = {
        "cap": 1 << 20,
        "warn": lambda _line: None,
        "environ": {},
        "needs_login": (UpstreamCredError,),
    }
    assert await run_remote(target, body, auth=auth, **kw) == "ran"
    assert servers.upstream_requests[0]["authorization"] == "Bearer ex-alice-1"
    servers.refuse = True
    with pytest.raises(RemoteStartError, match=r"^upstream docs refused a fresh token too \(HTTP 401\)$"):
        await run_remote(target, body, auth=auth, **kw)
    assert all(ALICE.token not in v for h in servers.upstream_requests for v in h.values())
