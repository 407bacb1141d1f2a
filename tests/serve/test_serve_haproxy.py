"""Three `assay mcp serve` replicas behind a real HAProxy (Debian's haproxy, which `./dev test`
installs) on one Postgres (docs/serve.md, "Several replicas", "Behind HAProxy"): 3 x 30
concurrent 2026-07-28-era calls of one user, spread round robin over the replicas, against a
per-user total of 40 calls: exactly 40 are allowed across the replicas, the rest denied by the
total, and another user's calls at the same time are all allowed. Every wait is on an event."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from test_serve_replicas import KEYS, PASSWORD, SESSION_KEY, replicas

LIMIT = 40
POLICY = f"""\
version: "2.0"
tools:
  allow: ["*"]
enforcement: {{ unconstrained_tools: allow }}
limits: {{ max_tool_calls_total: {LIMIT} }}
"""
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _haproxy_config(fd: int, backends: list[int]) -> str:
    servers = "".join(f"    server r{i} 127.0.0.1:{p}\n" for i, p in enumerate(backends))
    return f"""\
global
    maxconn 1024
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend mcp
    bind fd@{fd}
    default_backend assay
backend assay
    balance roundrobin
{servers}"""


async def _call(http: httpx2.AsyncClient, url: str, who: str, n: int) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": "local__pid", "arguments": {}, "_meta": META},
    }
    headers = {
        "Authorization": f"Bearer {KEYS[who]}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "local__pid",
    }
    r = await http.post(url, json=body, headers=headers)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def test_three_replicas_behind_haproxy_count_a_per_user_total_exactly(
    tmp_path: Path, pg_server: Any, base_env: dict[str, str]
) -> None:
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if haproxy is None:
        pytest.fail("haproxy is not installed (./dev test installs Debian's haproxy)", pytrace=False)
    env = {**base_env, "PGPASSWORD_ASSAY": PASSWORD, "GATEWAY_SESSION_KEY": SESSION_KEY}
    db = pg_server.database()
    with trio.fail_after(120):
        # round robin over alice's and bob's requests may give a replica more than 30 of alice's
        extra = "limits: {per_user_concurrency: 100}\n"
        async with replicas(tmp_path, db, env, ("a", "b", "c"), policy=POLICY, extra=extra) as started:
            # HAProxy takes a socket the test already listens on (bind fd@N), so a connection
            # made before it runs waits in the backlog: nothing to wait for but the answers
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(256)
            port = listener.getsockname()[1]
            cfg = tmp_path / "haproxy.cfg"
            cfg.write_text(_haproxy_config(listener.fileno(), [r.port for r in started]))
            check = subprocess.run(
                [haproxy, "-c", "-f", str(cfg)], capture_output=True, text=True, pass_fds=(listener.fileno(),)
            )
            assert check.returncode == 0, check.stdout + check.stderr
            proxy = await trio.lowlevel.open_process(
                [haproxy, "-db", "-f", str(cfg)], stdin=subprocess.DEVNULL, pass_fds=(listener.fileno(),)
            )
            listener.close()
            try:
                url = f"http://127.0.0.1:{port}/mcp"
                async with httpx2.AsyncClient(timeout=60) as http:
                    answers: dict[str, list[dict[str, Any]]] = {"alice": [], "bob": []}

                    async def one(who: str, n: int) -> None:
                        answers[who].append(await _call(http, url, who, n))

                    async with trio.open_nursery() as nursery:
                        for n in range(90):  # 3 x 30 of alice at once
                            nursery.start_soon(one, "alice", n)
                        for n in range(10):
                            nursery.start_soon(one, "bob", 1000 + n)
            finally:
                proxy.terminate()
                with trio.CancelScope(shield=True):
                    await proxy.wait()
    allowed = [a for a in answers["alice"] if not a["result"].get("isError")]
    denied = [a for a in answers["alice"] if a["result"].get("isError")]
    assert len(allowed) == LIMIT and len(denied) == 90 - LIMIT
    assert all("E_RATE_LIMIT" in json.dumps(a) for a in denied)
    assert all(not a["result"].get("isError") for a in answers["bob"])
    # each replica judged some of alice's calls (round robin), and they agree on one total
    per_replica = {}
    for name in ("a", "b", "c"):
        path = tmp_path / f"audit-{name}.ndjson"
        records = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        per_replica[name] = [r for r in records if r.get("subject") == "alice"]
    assert all(per_replica.values()), {k: len(v) for k, v in per_replica.items()}
    assert sum(1 for rs in per_replica.values() for r in rs if r["decision"] == "allow") == LIMIT
    # and the store counted each of the user's 90 calls once (allowed or denied), none twice
    import psycopg

    with psycopg.connect(db, password=PASSWORD) as conn:
        row = conn.execute("SELECT tool_calls FROM sessions WHERE name = 'alice'").fetchone()
    assert row is not None and row[0] == 90, row
