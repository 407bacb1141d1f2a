"""The rounds of a 2026-07-28 client's request whose upstream asks something (docs/serve.md,
"What upstreams ask of a 2026-07-28 client"), in memory: a :class:`Flight` over a stand-in
upstream send that the test answers."""

from __future__ import annotations

from typing import Any

import trio

from assay.serve.rounds import MAX_ASKS, MAX_PARKED, Flight, Parked, same_request


def _ask(mine: str, method: str = "sampling/createMessage") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": mine, "method": method, "params": {"n": mine}}


async def _noop(message: dict[str, Any]) -> None:
    pass


async def test_a_request_made_while_parked_waits_for_the_next_round() -> None:
    parked = Parked()
    flight = Flight("tools/call", {"name": "ask"})
    release = trio.Event()

    async def send() -> dict[str, Any]:
        await release.wait()
        return {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}

    async with trio.open_nursery() as nursery:
        nursery.start_soon(flight.run, send, lambda: None)
        await flight.related(_ask("s1"))
        first = await flight.round(_noop, parked.park)
        assert list(first["result"]["inputRequests"]) == ["s1"]
        await flight.related(_ask("s2"))  # the upstream asks again before the retry
        state = first["result"]["requestState"]
        taken = parked.take(state, "tools/call", {"name": "ask", "requestState": state})
        assert taken is flight
        sent = flight.resume({"inputResponses": {"s1": {"ok": 1}, "s2": {"not": "shown"}}})
        assert sent == [{"jsonrpc": "2.0", "id": "s1", "result": {"ok": 1}}]  # s2 was never shown
        second = await flight.round(_noop, parked.park)
        assert list(second["result"]["inputRequests"]) == ["s2"]
        state = second["result"]["requestState"]
        assert parked.take(state, "tools/call", {"name": "ask"}) is flight
        assert flight.resume({}) == [
            {"jsonrpc": "2.0", "id": "s2", "error": {"code": -32603, "message": "the client gave no answer"}}
        ]
        release.set()
        final = await flight.round(_noop, parked.park)
        assert final["result"] == {"content": []}


async def test_an_upstream_that_asks_without_end_fails_its_call_and_a_withdrawn_ask_is_dropped() -> None:
    flight = Flight("tools/call", {})

    async def send() -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError

    async with trio.open_nursery() as nursery:
        nursery.start_soon(flight.run, send, lambda: None)
        await flight.related(_ask("s0"))
        await flight.related({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s0"}})
        assert flight.asks == {}
        for i in range(MAX_ASKS + 1):
            await flight.related(_ask(f"s{i}"))
        with trio.fail_after(10):
            await flight.done.wait()
    assert flight.answer is not None and flight.answer["error"]["code"] == -32000


async def test_parked_flights_are_bounded_and_states_checked() -> None:
    parked = Parked()
    flights = [Flight("tools/call", {"name": "t", "arguments": {"i": i}}) for i in range(MAX_PARKED + 1)]
    tokens = [parked.park(f) for f in flights]
    assert len(parked) == MAX_PARKED and flights[0].scope.cancel_called  # the oldest was cancelled
    state = "assay-upstream." + tokens[1]
    assert "error" in parked.take(state, "prompts/get", {"name": "t", "arguments": {"i": 1}})
    assert "error" in parked.take(state, "tools/call", {"name": "t", "arguments": {"i": 1.0}})
    assert "error" in parked.take("assay-upstream.zz", "tools/call", {})
    assert parked.take(state, "tools/call", {"name": "t", "arguments": {"i": 1}, "_meta": {"x": 1}}) is flights[1]


def test_same_request_ignores_only_the_round_members() -> None:
    base = {"name": "t", "arguments": {"a": [1, {"b": None}]}}
    assert same_request(base, {**base, "_meta": {}, "inputResponses": {}, "requestState": "s"})
    assert same_request({"arguments": {"y": 1, "x": 2}, "name": "t"}, {"name": "t", "arguments": {"x": 2, "y": 1}})
    assert not same_request(base, {**base, "extra": 1})
    assert not same_request({"a": 1}, {"a": True})
