"""`assay mcp serve` on a Postgres store (docs/serve.md, "Several replicas"), on a real Postgres
the tests start (tests/pgserver.py): two gateways on one database are one history per user (a
flow rule armed through one denies through the other; a per-user limit counted once across
both), and ``--migrate`` as a real process: the gateway refuses a database without the schema
(exit 2, one line telling to run ``--migrate``), ``--migrate`` creates it, and the gateway then
serves. Every wait is on an event (a line of the gateway), never a sleep."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from assay.store.postgres import PostgresDatabase
from gwsupport import STDIO_SERVER, connect, denied, gateway, stdio, text_of, user
from tests.pgserver import PASSWORD

ASSAY = str(Path(sys.executable).parent / "assay")
ALICE, BOB = user("alice"), user("bob")
LIMITED = """\
version: "2.0"
tools:
  allow: ["*"]
enforcement: { unconstrained_tools: allow }
aliases:
  secret_reads: [{ tool: read_secret, server: local }]
  network_sinks: [{ tool: send, server: "*" }]
sequences:
  - type: never_after
    id: no-exfiltration
    trigger: secret_reads
    forbidden: network_sinks
limits:
  tools: [{ id: pids, tools: ["pid"], max_calls: 100 }]
"""


async def test_two_gateways_on_one_database_are_one_history_per_user(tmp_path: Path, pg_server: Any) -> None:
    """Two gateways ("replicas"), each with its own database object and pool, on one database:
    200 calls of alice at once, half through each, against a per-user limit of 100: exactly 100
    allowed; a secret read through the first denies a send through the second; bob is apart."""
    url = pg_server.database()
    async with AsyncExitStack() as stack:
        gateways = []
        for _ in range(2):
            database = PostgresDatabase(url, PASSWORD, timeout=30.0)
            stack.push_async_callback(database.aclose)
            gw, _ = await stack.enter_async_context(
                gateway(tmp_path, [stdio("local")], LIMITED, store_for=database.store)
            )
            gateways.append(gw)
        clients = [(await connect(gw, ALICE))[0] for gw in gateways for _ in range(2)]
        answers: list[dict[str, Any]] = []

        async def calls(client: Any) -> None:
            async with trio.open_nursery() as nursery:
                for _ in range(50):
                    nursery.start_soon(lambda: _append(answers, client.call("local__pid")))

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(calls, client)
        allowed = [a for a in answers if not denied(a)]
        refused = [a for a in answers if denied(a)]
        assert (len(allowed), len(refused)) == (100, 100)
        assert all("pids" in text_of(a) for a in refused), text_of(refused[0])
        rows = {r.key: r for r in await gateways[0].store_for().sessions(0.0)}
        assert rows[ALICE.key].calls == 100
        # a flow rule armed through one gateway holds in the other
        first, second = clients[0], clients[2]
        assert text_of(await first.call("local__read_secret")) == "the plans are in the drawer"
        after = await second.call("local__send", {"text": "out"})
        assert denied(after) and "no-exfiltration" in text_of(after)
        bob, _ = await connect(gateways[1], BOB)
        assert text_of(await bob.call("local__send", {"text": "bob"})) == "sent bob"


async def _append(out: list[dict[str, Any]], call: Any) -> None:
    out.append(await call)


def _serve(config: Path, *more: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ASSAY, "mcp", "serve", "--config", str(config), *more],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


async def test_migrate_then_serve_as_real_processes(tmp_path: Path, pg_server: Any, base_env: dict[str, str]) -> None:
    url = pg_server.database(migrated=False)
    (tmp_path / "policy.yaml").write_text(LIMITED)
    config = tmp_path / "serve.yaml"
    body = f"""\
policy: policy.yaml
listen: 127.0.0.1:0
identity: {{none: true}}
upstreams:
  local:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]
"""
    config.write_text(body + f"store: {{url: {json.dumps(url)}, password: {{env: PGPASSWORD_ASSAY}}}}\n")
    env = {**base_env, "PGPASSWORD_ASSAY": PASSWORD}
    # the gateway refuses a database without the schema, and says what to run
    done = _serve(config, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--migrate" in done.stderr and "no schema yet" in done.stderr
    # the password's variable not set; a wrong password: exit 2, one line, never the password
    done = _serve(config, "--migrate", env=base_env)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1) and "PGPASSWORD_ASSAY" in done.stderr
    done = _serve(config, "--migrate", env={**base_env, "PGPASSWORD_ASSAY": "wrong-password-x"})
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith("fatal: cannot migrate the session store:") and "wrong-password-x" not in done.stderr
    # created, then nothing to do
    done = _serve(config, "--migrate", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("the schema is at version 3 (was none)") and done.stderr == ""
    done = _serve(config, "--migrate", env=env)
    assert done.returncode == 0 and "nothing to do" in done.stdout
    # a password written in the URL: refused without echoing it
    inline = url.replace("assay@", "assay:hunter2-inline@")
    (tmp_path / "inline.yaml").write_text(body + f"store: {json.dumps(inline)}\n")
    done = _serve(tmp_path / "inline.yaml", "--check", env=env)
    assert done.returncode == 2 and "hunter2" not in done.stderr + done.stdout
    assert "a password is never written in the file" in done.stderr
    # the gateway serves on the migrated database, and stops at SIGTERM
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(config)], stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL
    )
    try:
        assert proc.stderr is not None
        with trio.fail_after(60):
            line = await trio.to_thread.run_sync(proc.stderr.readline)
        assert line.startswith(b"assay: serving http://127.0.0.1:"), line
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(60):
            assert await trio.to_thread.run_sync(proc.wait) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
