"""Policy by user through the gateway (docs/policy.md, "Policy by user (serve)"; docs/serve.md):
each user's tools/list shows only what the policy lets that user call, by the claims of the
user's token, and a call outside it is denied; 2026-era list results are private to the user."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gwsupport import connect, denied, gateway, stdio, text_of, user

POLICY = """\
version: "2.0"
tools:
  allow: ["pid", "read_secret"]
enforcement: { unconstrained_tools: allow }
users:
  - name: ops
    when: { claims: { groups: [ops] } }
    tools: { allow: ["send"] }
"""


async def test_lists_and_calls_follow_the_users_claims(tmp_path: Path) -> None:
    ops = replace(user("alice"), claims={"sub": "alice", "groups": ["dev", "ops"]})
    dev = replace(user("bob"), claims={"sub": "bob", "groups": "ops-team"})  # not "ops": no substring
    async with gateway(tmp_path, [stdio()], POLICY) as (gw, _warnings):
        a, _i = await connect(gw, ops)
        b, _i = await connect(gw, dev)
        a_tools = {t["name"] for t in (await a.request("tools/list"))["result"]["tools"]}
        b_tools = {t["name"] for t in (await b.request("tools/list"))["result"]["tools"]}
        assert {"local__pid", "local__read_secret", "local__send"} <= a_tools
        assert "local__send" not in b_tools and "local__delete_all" not in a_tools | b_tools
        assert text_of(await a.call("local__send", {"text": "hi"})) == "sent hi"
        assert denied(await b.call("local__send", {"text": "hi"}))


async def test_modern_era_lists_are_private_to_the_user(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio()], POLICY) as (gw, _warnings):
        a, _i = await connect(gw, user("alice"), version="2026-07-28")
        listed = (await a.request("tools/list"))["result"]
        assert listed.get("cacheScope") == "private"
