"""The gateway over real upstreams, through the Conversation API (docs/serve.md, "Upstreams and
the agent session of a user"): a small Python stdio server of our own (tests/serve/
gw_stdio_server.py), the Python SDK's Streamable HTTP server (tests/e2e/remote_server.py) and
server-everything over stdio. Every wait is on an event."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from assay.gateway.config import Upstream
from gwsupport import (
    EVERYTHING_SERVER,
    Client,
    TIMEOUT,
    connect,
    denied,
    gateway,
    remote_server,
    stdio,
    text_of,
    user,
)

ALICE, BOB = user("alice"), user("bob")


async def test_tools_of_every_upstream_merged_and_prefixed_denied_ones_hidden(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local"), stdio("other")]) as (gw, _):
        a, init = await connect(gw, ALICE)
        assert init["serverInfo"]["name"] == "assay-serve"
        assert init["protocolVersion"] == "2025-06-18"
        assert set(init["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
        names = [t["name"] for t in (await a.request("tools/list"))["result"]["tools"]]
        # both pages of each upstream, in the config's order; delete_all hidden (the policy denies it)
        own = ["pid", "read_secret", "send", "hang", "die", "ask", "change", "wait"]
        assert names == [f"local__{n}" for n in own] + [f"other__{n}" for n in own]
        answer = await a.call("local__delete_all")
        assert denied(answer) and "E_TOOL_DENIED" in text_of(answer)
        assert text_of(await a.call("other__send", {"text": "hi"})) == "sent hi"
        unknown = await a.call("nowhere__send")
        assert unknown["error"]["code"] == -32602 and unknown["id"] == a._next
        assert (await a.request("ping"))["result"] == {}
        assert (await a.request("sampling/nothing"))["error"]["code"] == -32601


async def test_prompts_resources_and_templates_routed(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local"), stdio("other")]) as (gw, _):
        a, _init = await connect(gw, ALICE)
        prompts = (await a.request("prompts/list"))["result"]["prompts"]
        assert [p["name"] for p in prompts] == ["local__greet", "other__greet"]
        got = await a.request("prompts/get", {"name": "other__greet"})
        assert got["result"]["messages"][0]["content"]["text"] == "hello from greet"
        resources = (await a.request("resources/list"))["result"]["resources"]
        assert [r["uri"] for r in resources] == ["mem://note", "mem://note"]
        read = await a.request("resources/read", {"uri": "mem://note"})
        assert read["result"]["contents"][0]["text"] == "note at mem://note"
        assert (await a.request("resources/read", {"uri": "mem://notes/7"}))["error"]["code"] == -32602
        await a.request("resources/templates/list")
        read = await a.request("resources/read", {"uri": "mem://notes/7"})
        assert read["result"]["contents"][0]["text"] == "note at mem://notes/7"


async def test_a_secret_read_on_one_upstream_denies_a_send_on_another_for_that_user_alone(tmp_path: Path) -> None:
    async with remote_server(tmp_path) as url:
        web = Upstream(name="web", url=url)
        async with gateway(tmp_path, [stdio("local"), web]) as (gw, _):
            a1, _i = await connect(gw, ALICE)
            a2, _i = await connect(gw, ALICE)
            b, _i = await connect(gw, BOB)
            names = [t["name"] for t in (await a1.request("tools/list"))["result"]["tools"]]
            assert "web__echo" in names and "local__read_secret" in names
            assert text_of(await a1.call("web__echo", {"message": "before"})) == "echo: before"
            assert text_of(await a1.call("local__read_secret")) == "the plans are in the drawer"
            after = await a1.call("web__echo", {"message": "after"})
            assert denied(after) and "no-exfiltration" in text_of(after)
            # the user's other conversation is the same agent session
            other = await a2.call("web__echo", {"message": "again"})
            assert denied(other) and "no-exfiltration" in text_of(other)
            # a read on another server label (`server: local` only) triggers nothing for bob
            assert text_of(await b.call("web__echo", {"message": "bob"})) == "echo: bob"
            assert text_of(await b.call("local__send", {"text": "bob"})) == "sent bob"
            # each user's own link, process and session
            pid_a = int(text_of(await a1.call("local__pid")))
            pid_b = int(text_of(await b.call("local__pid")))
            assert pid_a != pid_b
            assert text_of(await a2.call("local__pid")) == str(pid_a)
            assert set(gw.links_of(ALICE.key)) == {"local", "web"}
            assert gw.links_of(ALICE.key)["local"] is not gw.links_of(BOB.key)["local"]


async def test_an_idle_stdio_upstream_is_stopped_and_started_again_on_use(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local", idle_timeout_s=0.2)]) as (gw, _):
        a, _i = await connect(gw, ALICE)
        pid = int(text_of(await a.call("local__pid")))
        link = gw.links_of(ALICE.key)["local"]
        with trio.fail_after(TIMEOUT):
            await link.closed.wait()
        assert not Path(f"/proc/{pid}").exists()  # stopped and reaped
        assert gw.links_of(ALICE.key) == {}
        again = int(text_of(await a.call("local__pid")))
        assert again != pid


async def test_an_upstream_that_dies_answers_its_pending_calls_with_an_error_others_go_on(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, warnings):
        a1, _i = await connect(gw, ALICE)
        a2, _i = await connect(gw, ALICE)
        b, _i = await connect(gw, BOB)
        await b.call("local__pid")
        answers: dict[str, dict] = {}
        async with trio.open_nursery() as nursery:

            async def hang() -> None:
                answers["hang"] = await a1.call("local__hang", msg_id=7)

            nursery.start_soon(hang)
            await a1.wait_related(lambda m: m.get("method") == "notifications/message")
            answers["die"] = await a2.call("local__die", msg_id=7)
        assert answers["hang"]["id"] == 7 and answers["hang"]["error"]["code"] == -32000
        assert "local" in answers["hang"]["error"]["message"]
        assert "error" in answers["die"]
        assert text_of(await b.call("local__send", {"text": "still"})) == "sent still"
        assert text_of(await a1.call("local__send", {"text": "new"})) == "sent new"  # a new process


async def test_upstream_requests_reach_the_conversation_whose_call_caused_them(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a, _i = await connect(gw, ALICE)
        a.answers["sampling/createMessage"] = {
            "role": "assistant",
            "content": {"type": "text", "text": "yes"},
            "model": "m",
        }
        b, _i = await connect(gw, BOB)
        assert text_of(await a.call("local__ask", msg_id="q1")) == "sampled yes"
        asked = [m for m in a.related if m.get("method") == "sampling/createMessage"]
        assert len(asked) == 1 and str(asked[0]["id"]).startswith("s")  # the gateway's own id toward the client
        assert b.related == []


async def test_progress_tokens_and_equal_ids_of_two_conversations_kept_apart(tmp_path: Path) -> None:
    async with remote_server(tmp_path) as url:
        async with gateway(tmp_path, [Upstream(name="web", url=url)]) as (gw, _):
            a1, _i = await connect(gw, ALICE)
            a2, _i = await connect(gw, ALICE)
            got = {}
            async with trio.open_nursery() as nursery:
                for name, client in (("a1", a1), ("a2", a2)):

                    async def run(client=client, name=name) -> None:
                        params = {"name": "web__slow", "arguments": {"steps": 2}, "_meta": {"progressToken": "tok"}}
                        got[name] = await client.request("tools/call", params, msg_id=1)

                    nursery.start_soon(run)
            for client, name in ((a1, "a1"), (a2, "a2")):
                assert got[name]["id"] == 1 and "slow done" in text_of(got[name])
                progress = [m for m in client.related if m.get("method") == "notifications/progress"]
                assert [p["params"]["progressToken"] for p in progress] == ["tok", "tok"]
                assert [p["params"]["progress"] for p in progress] == [1, 2]


async def test_cancellation_and_list_changes(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local"), stdio("other")]) as (gw, _):
        a, _i = await connect(gw, ALICE)
        heard: list[dict] = []
        changed = trio.Event()

        async def emit(message: dict) -> None:
            heard.append(message)
            changed.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.conversation.listen, emit)
            result: dict = {}

            async def hang() -> None:
                result["hang"] = await a.call("local__hang", msg_id="h")

            nursery.start_soon(hang)
            await a.wait_related(lambda m: m.get("method") == "notifications/message")
            await a.conversation.notify(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "h"}}
            )
            assert text_of(await a.call("other__change")) == "changed"
            with trio.fail_after(TIMEOUT):
                await changed.wait()
            nursery.cancel_scope.cancel()
        assert heard == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        assert result["hang"]["error"]["code"] == -32800


async def test_a_2026_conversation_gets_complete_results(tmp_path: Path) -> None:
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a, init = await connect(gw, ALICE, version="2026-07-28")
        assert init["protocolVersion"] == "2026-07-28"
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        tools = await a.request("tools/list", {"_meta": meta})
        assert tools["result"]["resultType"] == "complete" and tools["result"]["cacheScope"] == "private"
        answer = await a.request("tools/call", {"name": "local__send", "arguments": {"text": "m"}, "_meta": meta})
        assert answer["result"]["resultType"] == "complete" and text_of(answer) == "sent m"
        await a.conversation.aclose()


async def test_server_everything_over_stdio(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not EVERYTHING_SERVER.is_file():
        pytest.fail("node and tests/e2e/node_modules (./dev test runs npm ci) are needed", pytrace=False)
    every = Upstream(name="every", command=(node, str(EVERYTHING_SERVER), "stdio"), env=(("PATH", os.environ["PATH"]),))
    async with gateway(tmp_path, [every, stdio("local")]) as (gw, _):
        a, _i = await connect(gw, ALICE)
        names = [t["name"] for t in (await a.request("tools/list"))["result"]["tools"]]
        assert "every__echo" in names and "local__pid" in names
        answer = await a.call("every__echo", {"message": "hi"})
        assert "hi" in text_of(answer)


async def test_an_approval_asks_the_conversation_whose_call_waits_for_it(tmp_path: Path) -> None:
    policy = 'version: "2.0"\ntools:\n  allow: ["*"]\n  approval_required: ["send"]\nenforcement: { unconstrained_tools: allow }\n'
    async with gateway(tmp_path, [stdio("local")], policy=policy) as (gw, _):
        yes, _i = await connect(gw, ALICE, caps={"elicitation": {}})
        yes.answers["elicitation/create"] = {"action": "accept", "content": {}}
        no, _i = await connect(gw, BOB, caps={"elicitation": {}})
        no.answers["elicitation/create"] = {"action": "decline"}
        assert text_of(await yes.call("local__send", {"text": "ok"}, msg_id=1)) == "sent ok"
        refused = await no.call("local__send", {"text": "no"}, msg_id=1)
        assert denied(refused)
        for client in (yes, no):
            asked = [m for m in client.related if m.get("method") == "elicitation/create"]
            assert len(asked) == 1 and "send" in asked[0]["params"]["message"]


async def test_each_call_is_recorded_with_the_client_of_its_own_conversation(tmp_path: Path) -> None:
    # docs/serve.md, "Records": one link of a user carries the calls of all the user's
    # conversations, each recorded with its own client's name and version, bounded and printable
    logs = {"decision_log": "decisions.ndjson", "audit_log": "audit.ndjson"}
    async with gateway(tmp_path, [stdio("local")], **logs) as (gw, _):
        cursor, _i = await connect(gw, ALICE, client_info={"name": "cursor", "version": "1.2"})
        odd, _i = await connect(gw, ALICE, client_info={"name": "evil\x1b[31m\u202e" + "x" * 500, "version": 7})
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        init = {"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "unknown"}, "_meta": meta}
        modern, _r = await gw.open(ALICE, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        bare, _i = await connect(gw, ALICE, client_info={"version": "no name"})
        stateless = Client(modern)
        for client, text in ((cursor, "a"), (odd, "b"), (cursor, "c"), (stateless, "d"), (bare, "e")):
            assert text_of(await client.call("local__send", {"text": text})) == f"sent {text}"
        assert len(gw.links_of(ALICE.key)) == 1  # one link carried them all
    audit = [json.loads(line) for line in (tmp_path / "audit.ndjson").read_text().splitlines()]
    events = [json.loads(line)["data"] for line in (tmp_path / "decisions.ndjson").read_text().splitlines()]
    odd_name = ("evil\ufffd[31m\ufffd" + "x" * 500)[:128]  # cut to 128 characters
    want = [
        ("cursor", "1.2"),
        (odd_name, None),
        ("cursor", "1.2"),
        ("claude-code", "2.0"),
        (None, None),
    ]
    for records in (audit, [e for e in events if e.get("tool") == "send"]):
        assert [(r.get("client_name"), r.get("client_version")) for r in records] == want
        keys = list(records[0])
        assert keys[keys.index("subject") + 1 :][:2] == ["client_name", "client_version"]
        assert "client_name" not in records[4] and all(r["subject"] == "alice" for r in records)


async def test_each_call_is_recorded_with_the_id_its_client_sent(tmp_path: Path) -> None:
    # docs/serve.md, "Records": the link numbers the requests of all the user's conversations
    # itself, but a record's request_id (and the tool_call_id made of it) is the client's own
    logs = {"decision_log": "decisions.ndjson", "audit_log": "audit.ndjson"}
    async with gateway(tmp_path, [stdio("local")], **logs) as (gw, _):
        one, _i = await connect(gw, ALICE)
        two, _i = await connect(gw, ALICE)
        sent = [(one, "call-\u00e9-1"), (two, 4242), (one, 7), (two, 7)]
        for client, msg_id in sent:
            assert text_of(await client.call("local__send", {"text": "x"}, msg_id=msg_id)) == "sent x"
        assert len(gw.links_of(ALICE.key)) == 1
    audit = [json.loads(line) for line in (tmp_path / "audit.ndjson").read_text().splitlines()]
    events = [json.loads(line)["data"] for line in (tmp_path / "decisions.ndjson").read_text().splitlines()]
    ids = [msg_id for _c, msg_id in sent]
    assert [r["request_id"] for r in audit] == ids
    sends = [e for e in events if e.get("tool") == "send"]
    assert [e["request_id"] for e in sends] == ids
    assert [e["tool_call_id"] for e in sends] == [f"req_{i}" for i in ids]


async def _settled(predicate: Any) -> None:
    """Wait, on the scheduler and no clock, until ``predicate()`` holds."""
    with trio.fail_after(TIMEOUT):
        while not predicate():
            await trio.testing.wait_all_tasks_blocked()


async def test_a_user_with_no_conversation_and_no_link_is_forgotten(tmp_path: Path) -> None:
    # docs/serve.md, "Upstreams and the agent session of a user": memory bounded by the users served now
    async with gateway(tmp_path, [stdio("local", idle_timeout_s=0.2), stdio("slow", idle_timeout_s=3)]) as (gw, _):
        for n in range(50):  # users that opened a conversation and closed it, no link ever opened
            c, _i = await connect(gw, user(f"u{n}"))
            await c.conversation.aclose()
        assert gw.users == {}
        a, _i = await connect(gw, ALICE)
        int(text_of(await a.call("local__pid")))
        link = gw.links_of(ALICE.key)["local"]
        with trio.fail_after(TIMEOUT):
            await link.closed.wait()  # idle: the link ends, the conversation stays, so does alice
        await _settled(lambda: "local" not in gw.users[ALICE.key].links)
        assert ALICE.key in gw.users
        await a.conversation.aclose()
        assert ALICE.key not in gw.users  # no conversation, no link: forgotten
        b, _i = await connect(gw, BOB)
        pid = int(text_of(await b.call("slow__pid")))
        link = gw.links_of(BOB.key)["slow"]
        await b.conversation.aclose()
        assert BOB.key in gw.users  # its link is open (3 s idle)
        with trio.fail_after(TIMEOUT):
            await link.closed.wait()
        await _settled(lambda: BOB.key not in gw.users)  # once it closes, bob is forgotten
        assert not Path(f"/proc/{pid}").exists()
        again, _i = await connect(gw, BOB)  # and served again as new
        assert int(text_of(await again.call("slow__pid"))) != pid


async def test_a_request_the_guard_cannot_read_is_answered_not_left_waiting(tmp_path: Path) -> None:
    """The front refuses what the guard would not read (docs/serve.md, "How a request flows");
    should a request reach a link that way anyhow (here: through the Conversation API, past the
    front), the guard's refusal carries a null id, and the link answers the request with it at
    once instead of waiting for an answer with its id that never comes."""
    async with gateway(tmp_path, [stdio("local")]) as (gw, _):
        a, _i = await connect(gw, ALICE)
        deep: Any = "x"
        for _ in range(200):  # deeper than the guard reads (docs/wrap.md, "Client frames")
            deep = [deep]
        with trio.fail_after(10):
            answer = await a.call("local__send", {"text": deep}, msg_id="deep-1")
        assert answer["id"] == "deep-1" and answer["error"]["code"] == -32600
        assert "could not read" in answer["error"]["message"]
        assert gw.links_of(ALICE.key)["local"].busy == 0  # nothing left waiting
        assert text_of(await a.call("local__send", {"text": "after"})) == "sent after"
