"""Postgres stopped and started again under load (docs/serve.md, "Several replicas" and "Health
and metrics"): two real `assay mcp serve` replicas on one Postgres (tests/pgserver.py), a
steady stream of concurrent 2026-07-28-era calls of one user spread over both, against a
per-user total so that every decision needs the store. While Postgres is down every call is
answered, and denied ``E_SESSION_STATE`` (none hangs), pings and tools/list still answer, and
/readyz on each admin listener says 503; once it is back the calls are judged again (allowed,
then denied by the total) and /readyz says 200. At the end the store's count is exactly the
calls the client saw allowed plus those denied by the total (no call allowed uncounted), and
each replica's /metrics counted the store's errors and, summed, exactly the decisions the
client saw. Every wait is on an event (an answer, a process's line), never a sleep."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import trio

from test_observe import samples, value
from test_serve_replicas import KEYS, PASSWORD, SESSION_KEY, Replica, replicas

LIMIT = 50
POLICY = f"""\
version: "2.0"
tools:
  allow: ["*"]
enforcement: {{ unconstrained_tools: allow }}
limits: {{ max_tool_calls_total: {LIMIT} }}
"""
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
WORKERS = 8  # calls in flight at any time
SLOWEST = 5.0  # no answer takes longer (the store's timeout is 2 s)


@dataclass
class Answer:
    replica: str
    sent: str  # the phase when it was sent: up, stopping, down, starting, back
    answered: str  # ... and when it was answered
    code: str | None  # None: allowed
    seconds: float
    before: int  # how many answers the client had when it was sent
    order: int  # its place among the answers


@dataclass
class Load:
    """The client's stream of calls and what it saw."""

    phase: str = "up"
    done: bool = False
    answers: list[Answer] = field(default_factory=list)
    news: trio.Event = field(default_factory=trio.Event)

    def add(self, answer: Answer) -> None:
        self.answers.append(answer)
        self.news.set()
        self.news = trio.Event()

    async def until(self, condition: Any) -> None:
        while not condition(self.answers):
            await self.news.wait()

    def count(self, sent: str, answered: str, code: str | None) -> int:
        return sum(1 for a in self.answers if (a.sent, a.answered, a.code) == (sent, answered, code))


def _headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {KEYS['alice']}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def _code(answer: dict[str, Any]) -> str | None:
    result = answer["result"]
    if not result.get("isError"):
        return None
    return str(json.loads(result["content"][1]["text"])["error_code"])


async def _request(http: httpx2.AsyncClient, replica: Replica, n: int, method: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": n, "method": method, "params": {"_meta": META}}
    got = await http.post(replica.url, json=body, headers=_headers(method))
    assert got.status_code == 200, got.text
    answer: dict[str, Any] = got.json()
    assert "result" in answer, answer
    return answer


async def _ready(http: httpx2.AsyncClient, replica: Replica) -> tuple[int, str]:
    got = await http.get(replica.admin + "/readyz")
    return got.status_code, got.text


async def test_postgres_stopped_and_started_under_load(
    tmp_path: Path, pg_server: Any, base_env: dict[str, str]
) -> None:
    env = {**base_env, "PGPASSWORD_ASSAY": PASSWORD, "GATEWAY_SESSION_KEY": SESSION_KEY}
    db = pg_server.database()
    load = Load()
    numbers = itertools.count()
    extra = "admin_listen: 127.0.0.1:0\n"
    try:
        with trio.fail_after(60):
            async with (
                replicas(tmp_path, db, env, ("a", "b"), policy=POLICY, extra=extra) as started,
                httpx2.AsyncClient(timeout=30) as http,
            ):
                for replica in started:
                    assert await _ready(http, replica) == (200, "ready\n")

                async def worker() -> None:
                    while not load.done:
                        n = next(numbers)
                        replica = started[n % len(started)]
                        body = {
                            "jsonrpc": "2.0",
                            "id": n,
                            "method": "tools/call",
                            "params": {"name": "local__pid", "arguments": {}, "_meta": META},
                        }
                        sent, before, start = load.phase, len(load.answers), trio.current_time()
                        got = await http.post(replica.url, json=body, headers=_headers("tools/call", "local__pid"))
                        assert got.status_code == 200, got.text
                        seconds = trio.current_time() - start
                        code = _code(got.json())
                        load.add(Answer(replica.name, sent, load.phase, code, seconds, before, len(load.answers)))

                async with trio.open_nursery() as nursery:
                    for _ in range(WORKERS):
                        nursery.start_soon(worker)
                    # some calls allowed through each replica, then Postgres goes
                    await load.until(lambda seen: {a.replica for a in seen if a.code is None} == {"a", "b"})
                    await load.until(lambda seen: sum(a.code is None for a in seen) >= 12)
                    load.phase = "stopping"
                    await trio.to_thread.run_sync(pg_server.stop)
                    load.phase = "down"
                    # not ready at once: the probe opens a connection of its own
                    for replica in started:
                        assert await _ready(http, replica) == (503, "not ready: the session store does not answer\n")
                    # pings and lists still answered, through each replica
                    for replica in started:
                        assert (await _request(http, replica, 10_000, "ping"))["result"] == {"resultType": "complete"}
                        listed = await _request(http, replica, 10_001, "tools/list")
                        assert "local__pid" in {t["name"] for t in listed["result"]["tools"]}
                    # calls keep being answered, denied, through both replicas
                    await load.until(
                        lambda seen: {a.replica for a in seen if (a.sent, a.answered) == ("down", "down")} == {"a", "b"}
                    )
                    await load.until(lambda seen: load.count("down", "down", "E_SESSION_STATE") >= 20)
                    load.phase = "starting"
                    await trio.to_thread.run_sync(pg_server.start)
                    load.phase = "back"
                    for replica in started:
                        assert await _ready(http, replica) == (200, "ready\n")
                    # judged again: allowed up to the total, then denied by it
                    await load.until(lambda seen: load.count("back", "back", "E_RATE_LIMIT") >= 10)
                    load.done = True
                metrics = [samples((await http.get(r.admin + "/metrics")).text) for r in started]
    finally:
        if pg_server.process is None:  # (the test failed while it was down: the next tests need it)
            pg_server.start()

    answers = load.answers
    codes = [a.code for a in answers]
    # every call was answered, none slowly
    assert max(a.seconds for a in answers) < SLOWEST, max(a.seconds for a in answers)
    assert set(codes) <= {None, "E_SESSION_STATE", "E_RATE_LIMIT"}, set(codes)
    # before: all allowed; while down: all denied E_SESSION_STATE
    assert all(a.code is None for a in answers if a.answered == "up")
    down = [a.code for a in answers if (a.sent, a.answered) == ("down", "down")]
    assert len(down) >= 20 and set(down) == {"E_SESSION_STATE"}
    # back: once a replica allowed a call, it denies no later call for the store
    for name in ("a", "b"):
        back = [a for a in answers if a.replica == name and a.sent == "back"]
        first = next(a.order for a in back if a.code is None)
        assert not [a for a in back if a.before > first and a.code == "E_SESSION_STATE"]
    # the store counted every call it judged, once: each allowed and each denied by the total
    allowed, limited = codes.count(None), codes.count("E_RATE_LIMIT")
    with psycopg.connect(db, password=PASSWORD) as conn:
        row = conn.execute("SELECT tool_calls FROM sessions WHERE name = 'alice'").fetchone()
    assert row is not None and row[0] == allowed + limited, (row, allowed, limited)
    assert allowed == LIMIT, allowed
    # the metrics: each replica counted store errors; the decisions, summed, are what the client saw
    for got in metrics:
        assert sum(v for (name, _), v in got.items() if name == "assay_serve_store_errors_total") >= 1
    assert sum(value(got, "assay_serve_decisions_total", decision="allow", code="") for got in metrics) == allowed
    for code in ("E_SESSION_STATE", "E_RATE_LIMIT"):
        assert sum(value(got, "assay_serve_decisions_total", decision="deny", code=code) for got in metrics) == (
            codes.count(code)
        )
    assert sum(value(got, "assay_serve_requests_total", method="tools/call", outcome="ok") for got in metrics) == len(
        answers
    )
