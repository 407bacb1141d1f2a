"""Sealed 2025-era session ids (docs/serve.md, "Several replicas"): the sans-IO sealing
(:mod:`assay.gateway.sealed`) and two HTTP fronts sharing one key, as two replicas would: a
session started on one goes on through the other, which opens the conversation again with the
version, capabilities and client the session began with; another user's presentation is a 404
on both; a DELETE ends it where it is sent; without the key the ids are one process's own."""

from __future__ import annotations

import base64
from typing import Any

import httpx2
import trio
from hypothesis import given
from hypothesis import strategies as st

from assay.gateway.sealed import MAX_SEALED_BYTES, PREFIX, Sealer
from tests.serve.frontfakes import FakeGateway, running

KEY = b"0123456789abcdef-session-key"
ALICE, BOB = "user:test#alice", "user:test#bob"
PARAMS = {"capabilities": {"sampling": {}, "roots": {"listChanged": True}}, "clientInfo": {"name": "c", "version": "1"}}


def test_seal_then_open_for_the_same_user_only() -> None:
    sealer = Sealer(KEY, max_age_s=100)
    sid = sealer.seal(ALICE, "2025-11-25", PARAMS, now=1000.0)
    assert sid.startswith(PREFIX) and sid.isascii() and sid.isprintable() and " " not in sid
    got = sealer.open(sid, ALICE, now=1050.0)
    assert got is not None
    assert (got.version, got.capabilities, got.client_info, got.expires) == (
        "2025-11-25",
        PARAMS["capabilities"],
        PARAMS["clientInfo"],
        1100,
    )
    assert got.initialize()["params"]["protocolVersion"] == "2025-11-25"
    assert sealer.open(sid, BOB, now=1050.0) is None  # the user is the associated data
    assert sealer.open(sid, ALICE, now=1100.0) is None  # expired
    assert Sealer(b"another-key-0123456789", 100).open(sid, ALICE, now=1050.0) is None
    assert sealer.open("random-id", ALICE, now=1050.0) is None
    # each id has its own nonce: two sessions of one user never share an id
    assert sealer.seal(ALICE, "2025-11-25", PARAMS, now=1000.0) != sid


def test_a_rotated_key_still_opens_the_ids_of_the_previous_one() -> None:
    old, new = KEY, b"the-next-session-key-0123456789"
    sid = Sealer(old, max_age_s=100).seal(ALICE, "2025-11-25", PARAMS, now=1000.0)
    rotated = Sealer(new, max_age_s=100, previous=[old])
    got = rotated.open(sid, ALICE, now=1050.0)
    assert got is not None and got.expires == 1100  # the old id keeps its own expiry
    assert rotated.open(sid, BOB, now=1050.0) is None and rotated.open(sid, ALICE, now=1100.0) is None
    assert Sealer(new, max_age_s=100).open(sid, ALICE, now=1050.0) is None  # without it: refused
    # a rotated sealer seals with the new key only: a replica still on the old one refuses it
    fresh = rotated.seal(ALICE, "2025-11-25", PARAMS, now=1000.0)
    assert Sealer(old, max_age_s=100).open(fresh, ALICE, now=1050.0) is None
    assert Sealer(new, max_age_s=100).open(fresh, ALICE, now=1050.0) is not None


def test_one_spelling_per_id() -> None:
    """base64's unused bits could give one sealed id several texts: only the canonical opens."""
    sealer = Sealer(KEY, max_age_s=100, random=lambda n: b"\x01" * n)
    sid = sealer.seal(ALICE, "2025-11-25", {}, now=0.0)
    body = sid[len(PREFIX) :]
    assert len(body) % 4 != 0  # unpadded: the last character has unused bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    others = [PREFIX + body[:-1] + c for c in alphabet if c != body[-1]]
    same_bytes = [
        o
        for o in others
        if base64.urlsafe_b64decode(o[len(PREFIX) :] + "=" * (-len(body) % 4))
        == base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    ]
    assert same_bytes and all(sealer.open(o, ALICE, now=1.0) is None for o in same_bytes)


@given(st.binary(min_size=1, max_size=8), st.integers(min_value=0, max_value=10_000))
def test_altered_ids_never_open(flip: bytes, where: int) -> None:
    sealer = Sealer(KEY, max_age_s=100, random=lambda n: b"\x07" * n)
    sid = sealer.seal(ALICE, "2025-06-18", PARAMS, now=0.0)
    raw = bytearray(base64.urlsafe_b64decode(sid[len(PREFIX) :] + "=" * (-len(sid) % 4)))
    for i, b in enumerate(flip):
        raw[(where + i) % len(raw)] ^= b or 1
    altered = PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    assert sealer.open(altered, ALICE, now=1.0) is None


@given(st.text(max_size=300))
def test_any_presented_id_is_refused_without_raising(text: str) -> None:
    assert Sealer(KEY, 100).open(text, ALICE, now=0.0) is None
    assert Sealer(KEY, 100).open(PREFIX + text, ALICE, now=0.0) is None


def test_a_large_declaration_stays_bounded() -> None:
    sealer = Sealer(KEY, max_age_s=100)
    huge = {"capabilities": {f"x{i}": {"blob": "y" * 500} for i in range(40)}, "clientInfo": {"name": "n" * 9000}}
    sid = sealer.seal(ALICE, "2025-11-25", huge, now=0.0)
    assert len(sid) < 4 * MAX_SEALED_BYTES
    got = sealer.open(sid, ALICE, now=1.0)
    assert got is not None and got.version == "2025-11-25"


# -- two fronts, one key ------------------------------------------------------------------------

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _init(version: str = "2025-06-18") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": version, **PARAMS}}


def _call(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}


async def _post(http: httpx2.AsyncClient, url: str, user: str, body: Any, sid: str | None = None) -> Any:
    headers = {**HEADERS, "Authorization": f"Bearer {user}"}
    if sid is not None:
        headers["Mcp-Session-Id"] = sid
    return await http.post(url, json=body, headers=headers)


async def test_a_session_goes_on_through_another_front_with_the_same_key() -> None:
    sealer = Sealer(KEY, max_age_s=3600)
    one, two = FakeGateway(), FakeGateway()
    with trio.fail_after(30):
        async with (
            running(one, sealer=sealer) as (a, _),
            running(two, sealer=Sealer(KEY, max_age_s=3600)) as (b, _),
            httpx2.AsyncClient(timeout=10) as http,
        ):
            r = await _post(http, a.url, "alice", _init())
            sid = r.headers["mcp-session-id"]
            assert sid.startswith(PREFIX)
            assert (await _post(http, a.url, "alice", _call(2), sid)).json()["result"]["content"][0][
                "text"
            ] == "alice:x"
            # another user's token with alice's id: 404 where the session lives, and elsewhere
            for url in (a.url, b.url):
                refused = await _post(http, url, "bob", _call(3), sid)
                assert refused.status_code == 404, refused.text
            assert [k for k, _ in two.opened] == []
            # the other front opens the conversation again for alice, with what she began with:
            # several requests at once open it once
            answers: list[Any] = []

            async def call(n: int) -> None:
                answers.append(await _post(http, b.url, "alice", _call(n), sid))

            async with trio.open_nursery() as nursery:
                for n in range(10, 15):
                    nursery.start_soon(call, n)
            assert [r.status_code for r in answers] == [200] * 5
            assert [k for k, _ in two.opened] == [ALICE]
            params = two.opened[0][1]["params"]
            assert params == {"protocolVersion": "2025-06-18", **PARAMS}
            # a DELETE there ends it there: the id is refused afterwards on that front
            gone = await http.delete(b.url, headers={"Authorization": "Bearer alice", "Mcp-Session-Id": sid})
            assert gone.status_code == 204
            assert (await _post(http, b.url, "alice", _call(20), sid)).status_code == 404
            assert len(two.opened) == 1


async def test_without_the_key_ids_are_one_fronts_own() -> None:
    one, two = FakeGateway(), FakeGateway()
    with trio.fail_after(30):
        async with (
            running(one) as (a, _),
            running(two) as (b, _),
            httpx2.AsyncClient(timeout=10) as http,
        ):
            sid = (await _post(http, a.url, "alice", _init())).headers["mcp-session-id"]
            assert not sid.startswith(PREFIX)
            assert (await _post(http, a.url, "alice", _call(2), sid)).status_code == 200
            assert (await _post(http, b.url, "alice", _call(3), sid)).status_code == 404
            assert two.opened == []


def test_the_configs_previous_key_opens_the_ids_sealed_before_the_rotation() -> None:
    from assay.gateway.configfile import parse_config
    from assay.serve.run import sealer_of

    text = (
        b"policy: p.yaml\nidentity: {none: true}\nupstreams: {a: {command: [x]}}\n"
        b"session_key: {env: NEW}\nsession_key_previous: {env: OLD}\n"
    )
    env = {"NEW": "the-next-session-key-0123456789", "OLD": KEY.decode()}
    rotated = sealer_of(parse_config(text, base_dir="/", environ=env), env)
    sid = Sealer(KEY, max_age_s=100).seal(ALICE, "2025-11-25", PARAMS, now=1000.0)
    assert rotated is not None and rotated.open(sid, ALICE, now=1050.0) is not None
    unrotated = sealer_of(parse_config(text.replace(b"session_key_previous: {env: OLD}\n", b""), base_dir="/"), env)
    assert unrotated is not None and unrotated.open(sid, ALICE, now=1050.0) is None
