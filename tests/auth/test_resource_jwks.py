"""The issuer's key set (docs/serve.md, "Identity"): the sans-IO cache, then the shell fetching
it from a real HTTP server on 127.0.0.1 (a trio server in the test)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial

import pytest
import trio
from joserfc.jwk import OctKey
from rsfakes import EC, ISSUER, NOW, ROTATED, RSA, Clock, jwks, oauth, token

from assay.auth.jwks import DEFAULT_TTL, MAX_BYTES, JwksError, KeySetCache, cache_ttl, parse_key_set
from assay.auth.resource_shell import fetch_over_http, open_identity
from assay.gateway.config import ServeConfig


def test_cache_control_within_bounds():
    assert cache_ttl("max-age=300") == 300
    assert cache_ttl("public, max-age=5") == 60
    assert cache_ttl('max-age="999999999"') == 86400
    assert cache_ttl("no-cache") == 60
    assert cache_ttl("private, no-store, max-age=900") == 60
    assert cache_ttl(None) == DEFAULT_TTL
    assert cache_ttl("max-age=x") == DEFAULT_TTL
    assert cache_ttl("s-maxage=900") == DEFAULT_TTL


def test_only_signature_keys_are_read():
    doc = {
        "keys": [
            RSA.as_dict(private=False),
            {**EC.as_dict(private=False), "use": "enc"},
            OctKey.generate_key(256, parameters={"kid": "hmac"}).as_dict(private=True),
            {"kty": "RSA", "kid": "broken", "n": "AA", "e": "AQAB", "extra": 1},
            {**ROTATED.as_dict(private=True)},  # published by mistake: read as its public half
            "junk",
        ]
    }
    keys = parse_key_set(json.dumps(doc).encode())
    assert sorted(k for k in keys if k) == ["ec-2", "rsa-1"]
    assert not keys["ec-2"][0].is_private
    for bad in (b"[]", b'{"keys": {}}', b"\xff", b'{"keys": [], "keys": []}', b'{"keys": ["x"]}', b"NaN"):
        with pytest.raises(JwksError):
            parse_key_set(bad)


def test_a_bad_answer_keeps_the_keys_held():
    cache = KeySetCache()
    cache.started(NOW)
    cache.fetched(jwks(RSA), None, NOW)
    cache.started(NOW + 700)
    with pytest.raises(JwksError):
        cache.fetched(b'{"keys": []}', None, NOW + 700)
    assert cache.keys("rsa-1") and cache.failure == "the key set holds no signature key"
    assert cache.keys(None) == cache.keys("rsa-1")


@dataclass
class JwksServer:
    """A key set over HTTP/1.1 on 127.0.0.1: serves ``body`` with ``cache_control``; counts."""

    body: bytes = field(default_factory=lambda: jwks(RSA))
    cache_control: str = "max-age=300"
    status: int = 200
    hold: bool = False
    requests: int = 0
    port: int = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        self.requests += 1
        if self.hold:
            await trio.sleep_forever()
        head = (
            f"HTTP/1.1 {self.status} X\r\ncontent-type: application/json\r\ncache-control: {self.cache_control}\r\n"
            f"content-length: {len(self.body)}\r\nconnection: close\r\n\r\n"
        )
        await stream.send_all(head.encode() + self.body)
        await stream.aclose()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks"


@pytest.fixture
async def server(nursery):
    srv = JwksServer()
    listeners = await nursery.start(partial(trio.serve_tcp, srv.handle, 0, host="127.0.0.1"))
    srv.port = listeners[0].socket.getsockname()[1]
    return srv


async def test_fetch_cache_and_refetch_on_a_new_kid(server):
    clock = Clock()
    oa = oauth(issuer=ISSUER, jwks_url=server.url)
    config = ServeConfig(base_dir="/", policy="p", upstreams=(), oauth=oa)
    ident = await open_identity(config, clock=clock, environ={})
    assert server.requests == 1
    for _ in range(3):
        assert (await ident("Bearer " + token(RSA))).subject == "alice"
    assert server.requests == 1  # kept for its max-age
    clock.now += 31
    server.body = jwks(RSA, EC)
    assert (await ident("Bearer " + token(EC))).subject == "alice"
    assert server.requests == 2  # a new kid: fetched again
    clock.now += 300
    await ident("Bearer " + token(RSA, exp=NOW + 3600))
    assert server.requests == 3  # past max-age: fetched again
    assert ident.source is not None and ident.source.cache.failure is None


async def test_what_the_fetch_refuses(server):
    fetch = fetch_over_http(server.url, environ={})
    server.status = 404
    with pytest.raises(JwksError, match=r"^the key set at http://127.0.0.1:\d+ answered HTTP 404$"):
        await fetch()
    server.status = 200
    server.body = b" " * (MAX_BYTES + 1)
    with pytest.raises(JwksError, match=f"is over {MAX_BYTES} bytes"):
        await fetch()
    server.hold = True
    with pytest.raises(JwksError, match=r"^no key set from http://127.0.0.1:\d+ within 0.5 s$"):
        await fetch_over_http(server.url, environ={}, deadline=0.5)()
    with pytest.raises(ValueError, match="must be https"):
        fetch_over_http("http://issuer.example/jwks")
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(JwksError, match="^cannot reach http://127.0.0.1"):
        await fetch_over_http(f"http://127.0.0.1:{port}/jwks", environ={})()
