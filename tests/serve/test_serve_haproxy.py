"""Three `assay mcp serve` replicas behind a real HAProxy (tests/serve/haproxysupport.py) on one
Postgres (docs/serve.md, "Several replicas", "Behind HAProxy"), all at once:

- 3 x 100 concurrent clients of one user, two 2026-07-28-era calls each, spread round robin over
  the replicas, against a per-user ``max_calls: 500`` rule: exactly 500 allowed across the
  replicas (the answers, the audit records), the store counts 500 calls that went to the server
  (and every one of the 600 calls once as a tool call), the upstream saw each allowed call once;
- a flow rule armed through replica A (a read, its answer back) denies the send through replica C;
- another user's calls at the same time are all allowed, and the first user's read does not arm
  their flow rule.

Every wait is on an event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import trio

from haproxysupport import answer, haproxy
from test_serve_replicas import PASSWORD, SESSION_KEY, replicas

LIMIT = 500
CLIENTS, EACH = 300, 2  # 3 x 100 clients of alice, two calls each
POLICY = f"""\
version: "2.0"
tools:
  allow: ["*"]
enforcement: {{ unconstrained_tools: allow }}
aliases:
  secret_reads: [{{ tool: read_secret, server: local }}]
  network_sinks: [{{ tool: send, server: "*" }}]
sequences:
  - type: never_after
    id: no-exfiltration
    trigger: secret_reads
    forbidden: network_sinks
    message: "nothing leaves once a secret was read"
limits:
  tools:
    - {{ id: per-user, tools: ["echo"], max_calls: {LIMIT} }}
"""


def _denied(a: dict[str, Any]) -> bool:
    return bool(a["result"].get("isError"))


async def test_three_replicas_behind_haproxy_count_a_per_user_limit_exactly(
    tmp_path: Path, pg_server: Any, base_env: dict[str, str]
) -> None:
    env = {**base_env, "PGPASSWORD_ASSAY": PASSWORD, "GATEWAY_SESSION_KEY": SESSION_KEY}
    db = pg_server.database()
    # round robin may give a replica more than 100 of alice's requests at once
    extra = "limits: {per_user_concurrency: 400}\n"
    with trio.fail_after(120):
        async with (
            replicas(tmp_path, db, env, ("a", "b", "c"), policy=POLICY, extra=extra) as (a, b, c),
            haproxy(tmp_path, [a.port, b.port, c.port]) as url,
            httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=None)) as http,
        ):
            echoes: dict[str, dict[str, dict[str, Any]]] = {"alice": {}, "bob": {}}
            flow: dict[str, dict[str, Any]] = {}

            async def client(who: str, k: int, calls: int) -> None:
                for j in range(calls):
                    message = f"{who}-{k}-{j}"
                    echoes[who][message] = await answer(http, url, who, k * 10 + j, "web__echo", message=message)

            async def arm_then_send() -> None:
                # the read's answer came back from A before the sends go to C: the same ordering
                flow["read"] = await answer(http, a.url, "alice", 90001, "local__read_secret")
                flow["alice"] = await answer(http, c.url, "alice", 90002, "local__send", text="the plans")
                flow["bob"] = await answer(http, c.url, "bob", 90003, "local__send", text="x")

            async with trio.open_nursery() as nursery:
                for k in range(CLIENTS):
                    nursery.start_soon(client, "alice", k, EACH)
                for k in range(10):
                    nursery.start_soon(client, "bob", k, 5)
                nursery.start_soon(arm_then_send)
    # the flow rule armed through A denied the send through C; bob's send went
    assert not _denied(flow["read"]) and "drawer" in json.dumps(flow["read"])
    assert _denied(flow["alice"]) and "nothing leaves" in json.dumps(flow["alice"])
    assert flow["bob"]["result"]["content"][0]["text"] == "sent x"
    alice = echoes["alice"]
    allowed = {m for m, a in alice.items() if not _denied(a)}
    denied = [a for a in alice.values() if _denied(a)]
    assert len(alice) == CLIENTS * EACH
    assert len(allowed) == LIMIT and len(denied) == CLIENTS * EACH - LIMIT
    assert all("E_RATE_LIMIT" in json.dumps(a) and "per-user" in json.dumps(a) for a in denied)
    assert all(a["result"]["content"][0]["text"] == f"echo: {m}" for m, a in alice.items() if m in allowed)
    assert len(echoes["bob"]) == 50 and not any(_denied(x) for x in echoes["bob"].values())
    # each replica judged some of alice's calls (round robin); together they allowed 500, each once
    audit = {name: _audit(tmp_path, name) for name in ("a", "b", "c")}
    echo_allows = [r for rs in audit.values() for r in rs if r.get("subject") == "alice" and r["tool"] == "echo"]
    assert all(any(r.get("subject") == "alice" for r in rs) for rs in audit.values())
    assert sum(r["decision"] == "allow" for r in echo_allows) == LIMIT
    assert len(echo_allows) == CLIENTS * EACH  # one record per call, none twice
    assert [(r["subject"], r["tool"], r["decision"]) for r in audit["c"] if r["tool"] == "send"] == [
        ("alice", "send", "deny"),
        ("bob", "send", "allow"),
    ]
    # the upstream ran each allowed call once, and no other of alice's
    ran = [json.loads(x)["arguments"]["message"] for x in (tmp_path / "calls.ndjson").read_text().splitlines()]
    assert sorted(m for m in ran if m.startswith("alice-")) == sorted(allowed)
    # the store: 500 of alice's calls went to `web` (501 to a server, with the read); each of her
    # 602 tool calls (allowed or denied) counted once; bob's 51, all his own
    with psycopg.connect(db, password=PASSWORD) as conn:
        rows = conn.execute(
            "SELECT s.name, s.tool_calls, s.calls, w.calls FROM sessions s"
            " JOIN servers w ON w.key = s.key AND w.server = 'web' ORDER BY s.name"
        ).fetchall()
    assert rows == [("alice", CLIENTS * EACH + 2, LIMIT + 1, LIMIT), ("bob", 51, 51, 50)], rows


def _audit(tmp: Path, name: str) -> list[dict[str, Any]]:
    path = tmp / f"audit-{name}.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
