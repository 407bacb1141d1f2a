"""Approvals through the gateway in the 2026-07-28 era (docs/serve.md, "Approvals"): a call that
needs a person's approval is answered ``input_required`` with a ``requestState`` the gateway signs
for the user, the upstream and this exact call, with an expiry and a one-time nonce kept in the
user's agent session in the store; the retry carries the person's answer. Real upstream (tests/
serve/gw_stdio_server.py), two gateways on one store for the replica cases. Every wait is on an
event."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from assay.policy.storeapi import MemoryStore
from gwsupport import Client, connect, denied, gateway, stdio, text_of, user

ALICE, BOB = user("alice"), user("bob")
KEY = b"k" * 32
POLICY = """\
version: "2.0"
tools:
  allow: ["*"]
  approval_required: ["send"]
enforcement: { unconstrained_tools: allow }
"""
CAPS = {"elicitation": {"form": {}}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": CAPS}


async def _modern(gw: Any, who: Any) -> Client:
    client, init = await connect(gw, who, version="2026-07-28", caps=CAPS)
    assert init["protocolVersion"] == "2026-07-28"
    return client


async def _first(client: Client, text: str) -> dict[str, Any]:
    answer = await client.request("tools/call", {"name": "local__send", "arguments": {"text": text}, "_meta": META})
    result = answer["result"]
    assert result["resultType"] == "input_required", answer
    request = result["inputRequests"]["assay-approval"]
    assert request["method"] == "elicitation/create" and "send" in request["params"]["message"]
    assert result["requestState"].startswith("assay-approval.2.")
    return result


async def _retry(client: Client, text: str, state: str, action: str = "accept") -> dict[str, Any]:
    params = {
        "name": "local__send",
        "arguments": {"text": text},
        "_meta": META,
        "inputResponses": {"assay-approval": {"action": action, "content": {}}},
        "requestState": state,
    }
    return await client.request("tools/call", params)


async def test_a_2026_approval_accepted_runs_once_declined_is_denied(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")], policy=POLICY, approval_key=KEY) as (gw, _):
        a = await _modern(gw, ALICE)
        first = await _first(a, "yes")
        # the person accepts: the retry runs, and the upstream gets the call without wrap's members
        done = await _retry(a, "yes", first["requestState"])
        assert text_of(done) == "sent yes" and done["result"]["resultType"] == "complete"
        # the same state again (a replay): its nonce was used
        again = await _retry(a, "yes", first["requestState"])
        assert denied(again) and "E_APPROVAL_DENIED" in text_of(again)
        # the person declines
        second = await _first(a, "no")
        refused = await _retry(a, "no", second["requestState"], action="decline")
        assert denied(refused) and "declined" in text_of(refused)
        # a state is for this exact call: other arguments are denied
        third = await _first(a, "one")
        other = await _retry(a, "two", third["requestState"])
        assert denied(other) and "E_APPROVAL_DENIED" in text_of(other)
        # nothing was asked through an elicitation request of the gateway's own (2026: none exist)
        assert not [m for m in a.related if m.get("method") == "elicitation/create"]


async def test_a_state_is_bound_to_its_user(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")], policy=POLICY, approval_key=KEY) as (gw, _):
        a = await _modern(gw, ALICE)
        b = await _modern(gw, BOB)
        first = await _first(a, "x")
        stolen = await _retry(b, "x", first["requestState"])
        assert denied(stolen) and "E_APPROVAL_DENIED" in text_of(stolen)
        # and it is still good for Alice (Bob's try used nothing of hers)
        assert text_of(await _retry(a, "x", first["requestState"])) == "sent x"


async def test_replicas_on_one_store_take_a_retry_once(tmp_path: Path) -> None:
    store = MemoryStore()
    async with AsyncExitStack() as stack:
        gw1, _w = await stack.enter_async_context(
            gateway(tmp_path / "1", [stdio("local")], policy=POLICY, store=store, approval_key=KEY)
        )
        gw2, _w = await stack.enter_async_context(
            gateway(tmp_path / "2", [stdio("local")], policy=POLICY, store=store, approval_key=KEY)
        )
        gw3, _w = await stack.enter_async_context(
            gateway(tmp_path / "3", [stdio("local")], policy=POLICY, store=store, approval_key=b"z" * 32)
        )
        a1, a2, a3 = await _modern(gw1, ALICE), await _modern(gw2, ALICE), await _modern(gw3, ALICE)
        # asked through one replica, answered through another: the state carries what it needs
        first = await _first(a1, "hop")
        assert text_of(await _retry(a2, "hop", first["requestState"])) == "sent hop"
        # replayed through the first replica: the used nonce is in the user's session in the store
        replay = await _retry(a1, "hop", first["requestState"])
        assert denied(replay) and "E_APPROVAL_DENIED" in text_of(replay)
        # a gateway with another key does not take the state at all
        second = await _first(a1, "key")
        assert denied(await _retry(a3, "key", second["requestState"]))
        assert text_of(await _retry(a1, "key", second["requestState"])) == "sent key"


async def test_a_2025_client_is_still_asked_by_elicitation(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")], policy=POLICY, approval_key=KEY) as (gw, _):
        yes, _i = await connect(gw, ALICE, caps={"elicitation": {}})
        yes.answers["elicitation/create"] = {"action": "accept", "content": {}}
        assert text_of(await yes.call("local__send", {"text": "ok"})) == "sent ok"
        assert [m for m in yes.related if m.get("method") == "elicitation/create"]
