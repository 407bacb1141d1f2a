"""A remote upstream reached with the gateway's OAuth client credentials, or with a token
exchanged for each user's own (docs/serve.md, "Upstreams and the agent session of a user"): a
token endpoint of the test's (hypercorn on 127.0.0.1) and the Python SDK's Streamable HTTP server
that wants one bearer token."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import trio

from assay.gateway.config import ClientCredentials, Secret, TokenExchange, Upstream
from assay.auth.grants import TOKEN_EXCHANGE
from assay.auth.upstream_creds import ACCESS_TOKEN_TYPE
from gwsupport import connect, gateway, remote_server, text_of, user


@asynccontextmanager
async def token_endpoint() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A token endpoint: client ``gw``/``s3cret`` (Basic); client credentials give ``tok-cc``, a
    token exchange ``tok-<subject token>``. Every form it was sent is recorded."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    asked: list[dict[str, str]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": kind + ".complete"})
                if kind == "lifespan.shutdown":
                    return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        form = dict(parse_qsl(body.decode()))
        headers = dict(scope["headers"])
        form["_auth"] = headers.get(b"authorization", b"").decode()
        asked.append(form)
        good = "Basic " + base64.b64encode(b"gw:s3cret").decode()
        if form["_auth"] != good:
            status, answer = 401, {"error": "invalid_client"}
        elif form.get("grant_type") == "client_credentials":
            status, answer = 200, {"access_token": "tok-cc", "token_type": "Bearer", "expires_in": 3600}
        elif form.get("grant_type") == TOKEN_EXCHANGE:
            token = "tok-" + form["subject_token"]
            status, answer = (
                200,
                {"access_token": token, "token_type": "Bearer", "issued_token_type": ACCESS_TOKEN_TYPE},
            )
        else:
            status, answer = 400, {"error": "unsupported_grant_type"}
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    config = Config()
    config.bind = ["127.0.0.1:0"]
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)
        )
        yield binds[0] + "/token", asked
        stop.set()


async def test_client_credentials_and_token_exchange(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("GW_SECRET", "s3cret")
    secret = Secret(env="GW_SECRET")
    async with token_endpoint() as (token_url, asked):
        async with remote_server(tmp_path, {"E2E_EXPECT_AUTH": "Bearer tok-cc"}) as url:
            cc = Upstream(name="web", url=url, credential=ClientCredentials(token_url, "gw", secret, scope="mcp"))
            async with gateway(tmp_path, [cc]) as (gw, warnings):
                a, _i = await connect(gw, user("alice"))
                b, _i = await connect(gw, user("bob"))
                got = await a.call("web__echo", {"message": "a"})
                assert text_of(got) == "echo: a", (got, warnings)
                assert text_of(await b.call("web__echo", {"message": "b"})) == "echo: b"
        # one token for the gateway, asked once, used for both users' links
        assert [(f["grant_type"], f.get("scope")) for f in asked] == [("client_credentials", "mcp")]
        asked.clear()
        async with remote_server(tmp_path, {"E2E_EXPECT_AUTH": "Bearer tok-alice-token"}) as url:
            tx = Upstream(
                name="web", url=url, credential=TokenExchange(token_url, "gw", secret, audience="https://web")
            )
            async with gateway(tmp_path, [tx]) as (gw, warnings):
                alice = replace(user("alice"), token="alice-token")
                a, _i = await connect(gw, alice)
                b, _i = await connect(gw, replace(user("bob"), token="bob-token"))
                nobody, _i = await connect(gw, user("carol"))
                assert text_of(await a.call("web__echo", {"message": "a"})) == "echo: a"
                # bob's exchanged token is bob's: this upstream takes alice's alone
                assert (await b.call("web__echo", {"message": "b"}))["error"]["code"] == -32000
                assert (await nobody.call("web__echo", {"message": "c"}))["error"]["code"] == -32000
                assert any("signed in without one" in w for w in warnings), warnings
                assert not any("alice-token" in w or "bob-token" in w for w in warnings)
        exchanges = [(f["subject_token"], f["audience"], f["subject_token_type"]) for f in asked]
        # alice's once; bob's again after the upstream's 401 (a fresh token is asked once)
        assert exchanges[0] == ("alice-token", "https://web", ACCESS_TOKEN_TYPE)
        assert exchanges[1:] == [("bob-token", "https://web", ACCESS_TOKEN_TYPE)] * 2
