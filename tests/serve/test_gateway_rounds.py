"""What an upstream asks a 2026-07-28-era client (docs/serve.md, "What upstreams ask of a
2026-07-28 client"): the upstream's request during a call (a link is a 2025-era session) becomes
an ``input_required`` result, and the client's retry carries the answer back to that upstream's
request. Real upstream (tests/serve/gw_stdio_server.py, whose ``ask`` tool samples the client).
Every wait is on an event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from assay.serve import rounds
from gwsupport import TIMEOUT, Client, connect, gateway, stdio, text_of, user

ALICE, BOB = user("alice"), user("bob")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}


async def _modern(gw: Any, who: Any) -> Client:
    client, _init = await connect(gw, who, version="2026-07-28", caps={"sampling": {}})
    return client


def _call(name: str, arguments: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "_meta": META, **more}


async def _asked(client: Client, arguments: dict[str, Any] | None = None) -> tuple[str, str, dict[str, Any]]:
    answer = await client.request("tools/call", _call("local__ask", arguments or {}))
    result = answer["result"]
    assert result["resultType"] == "input_required", answer
    ((mine, request),) = result["inputRequests"].items()
    assert request["method"] == "sampling/createMessage" and request["params"]["maxTokens"] == 5
    assert result["requestState"].startswith("assay-upstream.")
    return mine, result["requestState"], request


async def test_an_upstream_request_is_asked_in_rounds_and_answered_by_the_retry(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a = await _modern(gw, ALICE)
        mine, state, _request = await _asked(a)
        # no request of a server ever reaches a 2026-07-28 client
        assert not [m for m in a.related if "id" in m]
        done = await a.request(
            "tools/call", _call("local__ask", {}, inputResponses={mine: SAMPLED}, requestState=state)
        )
        assert done["result"]["resultType"] == "complete" and text_of(done) == "sampled yes"
        # the state is spent: a replay names nothing
        replay = await a.request(
            "tools/call", _call("local__ask", {}, inputResponses={mine: SAMPLED}, requestState=state)
        )
        assert replay["error"]["code"] == -32602


async def test_a_retry_must_be_the_same_request_of_the_same_user(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a, b = await _modern(gw, ALICE), await _modern(gw, BOB)
        mine, state, _request = await _asked(a, {"n": 1})
        other = await a.request(
            "tools/call", _call("local__ask", {"n": 2}, inputResponses={mine: SAMPLED}, requestState=state)
        )
        assert other["error"]["code"] == -32602
        stolen = await b.request(
            "tools/call", _call("local__ask", {"n": 1}, inputResponses={mine: SAMPLED}, requestState=state)
        )
        assert stolen["error"]["code"] == -32602
        # neither took the flight: Alice's own retry still goes through
        done = await a.request(
            "tools/call", _call("local__ask", {"n": 1}, inputResponses={mine: SAMPLED}, requestState=state)
        )
        assert text_of(done) == "sampled yes"


async def test_a_retry_without_the_answer_answers_the_upstream_with_an_error(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a = await _modern(gw, ALICE)
        _mine, state, _request = await _asked(a)
        done = await a.request("tools/call", _call("local__ask", {}, inputResponses={}, requestState=state))
        assert text_of(done) == "sampled ?"  # the upstream read an error answer


async def test_a_parked_flight_expires_and_the_upstream_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rounds, "PARK_S", 0.0)
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a = await _modern(gw, ALICE)
        mine, state, _request = await _asked(a)
        link = gw.links_of(ALICE.key)["local"]
        parked = gw.users[ALICE.key].parked
        flight = next(iter(parked._flights.values()), None)
        if flight is not None:  # not yet ended: wait for its cancellation
            with trio.fail_after(TIMEOUT):
                await flight.done.wait()
        assert len(parked) == 0 and link.busy == 0  # cancelled upstream, forgotten here
        late = await a.request(
            "tools/call", _call("local__ask", {}, inputResponses={mine: SAMPLED}, requestState=state)
        )
        assert late["error"]["code"] == -32602


async def test_a_2025_client_is_still_sent_the_request(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a, _i = await connect(gw, ALICE)
        a.answers["sampling/createMessage"] = SAMPLED
        assert text_of(await a.call("local__ask")) == "sampled yes"
        assert [m for m in a.related if m.get("method") == "sampling/createMessage"]
