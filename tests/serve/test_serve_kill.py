"""A replica SIGKILLed in the middle of the load (docs/serve.md, "Several replicas", "Behind
HAProxy"): three `assay mcp serve` replicas behind a real HAProxy (tests/serve/haproxysupport.py;
``retries`` with ``option redispatch``, so a connection the dead replica refuses goes to another)
on one Postgres, and one remote upstream that logs every call it runs. 20 rounds, each a burst of
concurrent 2026-07-28-era calls of one user with unique arguments against a per-user ``max_calls``
rule; a random replica is SIGKILLed after a random number of answers and started again on its port
(waiting on its ready line). Whatever the kill point:

- every call the client saw allowed ran upstream exactly once and was counted;
- every call that ran upstream was answered allowed or reported failed by the client, none ran
  twice, and no denied call ran;
- the store's count of the calls that went to the server grew by at least the calls seen allowed
  and at most those plus the failed ones, its count of tool calls by at least the answered ones;
- once a call was denied by the rule, the store counts exactly ``max_calls``.

The seed is random and printed with a failure; ``KILL_SEED=<n>`` replays it. Every wait is on an
event, never a sleep."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import trio

from haproxysupport import call, haproxy
from test_serve_replicas import PASSWORD, SESSION_KEY, Replica, _start, replicas

ROUNDS, BURST = 20, 30
LIMIT = 500  # reached in the last rounds: denials under the kills too
POLICY = f"""\
version: "2.0"
tools:
  allow: ["*"]
enforcement: {{ unconstrained_tools: allow }}
limits:
  tools:
    - {{ id: per-user, tools: ["echo"], max_calls: {LIMIT} }}
"""
# a connection the dead replica refuses is tried again on another; a request it had taken is not
# (HAProxy retries only failed connections by default: a POST is never sent twice)
BACKEND = "    retries 3\n    option redispatch 1\n"


def _counts(db: str) -> tuple[int, int]:
    """alice's tool calls (allowed or denied) and calls that went to a server, in the store. Read
    under the lock every call's writes take: a killed replica's transaction that held it (its
    COMMIT perhaps still on the way) has ended, committed or not, before the counts are read."""
    with psycopg.connect(db, password=PASSWORD) as conn:
        row = conn.execute("SELECT tool_calls, calls FROM sessions WHERE name = 'alice' FOR UPDATE").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


async def _restart(tmp: Path, old: Replica, env: dict[str, str]) -> Replica:
    """``old`` (dead) started again on its port, once it printed its ready line."""
    config = tmp / f"serve-{old.name}.yaml"
    text = config.read_text().replace("listen: 127.0.0.1:0\n", f"listen: 127.0.0.1:{old.port}\n")
    config.write_text(text)
    new = await trio.to_thread.run_sync(_start, config, old.name, env)
    assert new.port == old.port
    return new


async def _round(http: httpx2.AsyncClient, url: str, rnd: int, victim: Replica, kill_after: int) -> dict[str, str]:
    """One burst: each call's outcome by its message (allowed, denied, failed); ``victim`` is
    SIGKILLed once ``kill_after`` answers came back."""
    outcome: dict[str, str] = {}
    enough = trio.Event()

    async def one(i: int) -> None:
        message = f"r{rnd}-{i}"
        try:
            r = await call(http, url, "alice", rnd * 1000 + i, "web__echo", {"message": message})
            got = r.json() if r.status_code == 200 else None
        except (httpx2.TransportError, ValueError):
            got = None
        if got is None or "result" not in got:
            outcome[message] = "failed"
        elif got["result"].get("isError"):
            assert "E_RATE_LIMIT" in json.dumps(got), got
            outcome[message] = "denied"
        else:
            assert got["result"]["content"][0]["text"] == f"echo: {message}", got
            outcome[message] = "allowed"
        if len(outcome) >= kill_after:
            enough.set()

    async def kill() -> None:
        await enough.wait()
        victim.proc.kill()

    if kill_after == 0:
        enough.set()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill)
        for i in range(BURST):
            nursery.start_soon(one, i)
    return outcome


async def test_a_replica_killed_mid_load_loses_no_count_and_counts_nothing_twice(
    tmp_path: Path, pg_server: Any, base_env: dict[str, str]
) -> None:
    seed = int(os.environ.get("KILL_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    env = {**base_env, "PGPASSWORD_ASSAY": PASSWORD, "GATEWAY_SESSION_KEY": SESSION_KEY}
    db = pg_server.database()
    seen: dict[str, str] = {}
    try:
        with trio.fail_after(240):  # 20 restarts; a loaded 2-core machine takes ~100 s
            async with (
                replicas(tmp_path, db, env, ("a", "b", "c"), policy=POLICY) as started,
                haproxy(tmp_path, [r.port for r in started], BACKEND) as url,
                httpx2.AsyncClient(timeout=30) as http,
            ):
                for rnd in range(ROUNDS):
                    before = await trio.to_thread.run_sync(_counts, db)
                    at = rng.randrange(len(started))
                    victim = started[at]
                    outcome = await _round(http, url, rnd, victim, rng.randrange(BURST))
                    assert await trio.to_thread.run_sync(victim.proc.wait) == -9
                    after = await trio.to_thread.run_sync(_counts, db)
                    started[at] = await _restart(tmp_path, victim, env)
                    n = {k: sum(v == k for v in outcome.values()) for k in ("allowed", "denied", "failed")}
                    tool_calls, calls = after[0] - before[0], after[1] - before[1]
                    where = f"round {rnd}, {victim.name} killed: {n}, store +{tool_calls} tool calls +{calls} calls"
                    assert n["allowed"] <= calls <= n["allowed"] + n["failed"], where
                    assert n["allowed"] + n["denied"] <= tool_calls <= BURST, where
                    seen.update(outcome)
        ran = [json.loads(x)["arguments"]["message"] for x in (tmp_path / "calls.ndjson").read_text().splitlines()]
        allowed = {m for m, v in seen.items() if v == "allowed"}
        failed = {m for m, v in seen.items() if v == "failed"}
        twice = {m for m in ran if ran.count(m) > 1}
        assert not twice, f"ran twice upstream: {sorted(twice)}"
        assert allowed <= set(ran), f"allowed, never ran: {sorted(allowed - set(ran))}"
        assert set(ran) <= allowed | failed, f"ran, neither allowed nor failed: {sorted(set(ran) - allowed - failed)}"
        tool_calls, calls = _counts(db)
        assert len(allowed) <= calls <= len(allowed) + len(failed) and calls <= LIMIT
        if "denied" in seen.values():
            assert calls == LIMIT
        assert failed, "no call failed: the kills hit nothing"
        print(
            f"seed {seed}: {len(allowed)} allowed, {len(failed)} failed, {len(seen) - len(allowed) - len(failed)} denied"
        )
    except BaseException as e:
        e.add_note(f"KILL_SEED={seed} replays this run")
        raise
