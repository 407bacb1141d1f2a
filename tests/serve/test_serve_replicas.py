"""`assay mcp serve` as several replicas (docs/serve.md, "Several replicas"): three real gateway
processes, each with its own state directory, on one Postgres (tests/pgserver.py) and one
``session_key``. The MCP Python SDK's client starts a 2025-era session through replica A (a tiny
TCP forwarder in the test stands for the load balancer), arms a flow rule there, and after A is
SIGKILLed goes on with the same ``Mcp-Session-Id`` through replica B: B opens the conversation
again (its own stdio upstream for the user, a new session with the remote upstream) and the flow
rule armed through A denies there, judged against the one history in Postgres. Another user's
token with that id is a 404 on B and on C. Every wait is on an event, never a sleep."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gwsupport import STDIO_SERVER, remote_server
from tests.pgserver import PASSWORD

ASSAY = str(Path(sys.executable).parent / "assay")
KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}
SESSION_KEY = "a-session-key-for-the-replicas-0123"
POLICY = """\
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
    message: "nothing leaves once a secret was read"
"""


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    lines: list[bytes] = field(default_factory=list)
    admin: str = ""  # the admin listener's base URL, when the config sets admin_listen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def _config(tmp: Path, name: str, db: str, remote: str, extra: str = "") -> Path:
    path = tmp / f"serve-{name}.yaml"
    path.write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:0
state_dir: {tmp / f"state-{name}"}
identity: {{api_keys: keys.txt}}
store: {{url: {json.dumps(db)}, password: {{env: PGPASSWORD_ASSAY}}}}
session_key: {{env: GATEWAY_SESSION_KEY}}
logs: {{audit: audit-{name}.ndjson}}
upstreams:
  local: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]}}
  web: {{url: "{remote}"}}
{extra}"""
    )
    return path


def _start(config: Path, name: str, env: dict[str, str]) -> Replica:
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    admin = ""
    if line.startswith(b"assay: admin on "):  # admin_listen: it listens first
        admin = line.split()[3].decode()
        line = proc.stderr.readline()
    assert line.startswith(b"assay: serving http://127.0.0.1:"), line + proc.stderr.read()
    replica = Replica(name, proc, int(line.split()[2].decode().rsplit(":", 1)[1].split("/")[0]), admin=admin)
    stderr = proc.stderr

    def drain() -> None:  # the rest of its output, so a full pipe never stops it
        for more in iter(stderr.readline, b""):
            replica.lines.append(more)

    threading.Thread(target=drain, daemon=True).start()
    return replica


class Forwarder:
    """A TCP forwarder on 127.0.0.1 standing for the load balancer: each connection goes to the
    current target; :meth:`switch` sends new connections elsewhere and cuts the open ones."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self._live: set[trio.CancelScope] = set()

    def switch(self, target: int) -> None:
        self.target = target
        for scope in list(self._live):
            scope.cancel()

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._one, listeners)

    async def _one(self, client: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            self._live.add(scope)
            try:
                server = await trio.open_tcp_stream("127.0.0.1", self.target)
            except OSError:
                self._live.discard(scope)
                await client.aclose()
                return
            try:
                async with trio.open_nursery() as nursery:

                    async def pipe(a: trio.SocketStream, b: trio.SocketStream) -> None:
                        try:
                            while data := await a.receive_some(65536):
                                await b.send_all(data)
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            pass
                        nursery.cancel_scope.cancel()  # one side closed: the connection ends

                    nursery.start_soon(pipe, client, server)
                    nursery.start_soon(pipe, server, client)
            finally:
                self._live.discard(scope)
        with trio.CancelScope(shield=True):
            await server.aclose()
            await client.aclose()


@asynccontextmanager
async def replicas(
    tmp: Path, db: str, env: dict[str, str], names: tuple[str, ...], policy: str = POLICY, extra: str = ""
) -> AsyncIterator[list[Replica]]:
    (tmp / "policy.yaml").write_text(policy)
    (tmp / "keys.txt").write_text(
        "".join(f"{who} sha256:{hashlib.sha256(key.encode()).hexdigest()}\n" for who, key in KEYS.items())
    )
    started: list[Replica] = []
    async with remote_server(tmp) as remote:
        try:
            async with trio.open_nursery() as nursery:
                for name in names:

                    async def one(name: str = name) -> None:
                        started.append(
                            await trio.to_thread.run_sync(_start, _config(tmp, name, db, remote, extra), name, env)
                        )

                    nursery.start_soon(one)
            started.sort(key=lambda r: names.index(r.name))
            yield started
        finally:
            for replica in started:
                if replica.proc.poll() is None:
                    replica.proc.terminate()
            for replica in started:
                await trio.to_thread.run_sync(replica.proc.wait, 30)


def _client(url: str, who: str, seen: list[str]) -> Client:
    async def record(response: Any) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in seen:
            seen.append(sid)

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=30, event_hooks={"response": [record]}
    )
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _audit(tmp: Path, name: str) -> list[dict[str, Any]]:
    path = tmp / f"audit-{name}.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_session_goes_on_through_another_replica_after_a_sigkill(
    tmp_path: Path, pg_server: Any, base_env: dict[str, str]
) -> None:
    env = {**base_env, "PGPASSWORD_ASSAY": PASSWORD, "GATEWAY_SESSION_KEY": SESSION_KEY}
    db = pg_server.database()
    with trio.fail_after(90):
        async with replicas(tmp_path, db, env, ("a", "b", "c")) as (a, b, c), trio.open_nursery() as nursery:
            balancer = Forwarder(a.port)
            await nursery.start(balancer.serve)
            front = f"http://127.0.0.1:{balancer.port}/mcp"
            seen: list[str] = []
            async with _client(front, "alice", seen) as alice:
                assert _text(await alice.call_tool("web__echo", {"message": "hi"})) == "echo: hi"
                assert _text(await alice.call_tool("local__read_secret", {})) == "the plans are in the drawer"
                assert len(seen) == 1
                sid = seen[0]
                a.proc.kill()  # SIGKILL: nothing of A's memory survives
                await trio.to_thread.run_sync(a.proc.wait)
                balancer.switch(b.port)
                # the same session, through B: the flow rule armed through A denies the send
                sent = await alice.call_tool("local__send", {"text": "the plans"})
                assert sent.is_error, _text(sent)
                # B opened its own session with the remote upstream for alice
                assert _text(await alice.call_tool("web__add", {"a": 2, "b": 3})) == "5"
                assert seen == [sid]  # no new session: the client went on with its id
                # another user's token with alice's id: 404 where the session now lives and
                # on a replica that never saw it
                async with httpx2.AsyncClient(timeout=10) as http:
                    for replica in (b, c):
                        got = await http.post(
                            replica.url,
                            json={"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "local__pid"}},
                            headers={
                                "Authorization": f"Bearer {KEYS['bob']}",
                                "Mcp-Session-Id": sid,
                                "Accept": "application/json, text/event-stream",
                            },
                        )
                        assert got.status_code == 404, (replica.name, got.status_code, got.text)
            # bob is another user: his send goes, through C
            balancer.switch(c.port)
            async with _client(front, "bob", []) as bob:
                assert _text(await bob.call_tool("local__send", {"text": "x"})) == "sent x"
            nursery.cancel_scope.cancel()
    denied = [r for r in _audit(tmp_path, "b") if r["decision"] == "deny"]
    assert [(r["subject"], r["server"], r["tool"]) for r in denied] == [("alice", "local", "send")]
    assert "nothing leaves" in denied[0]["reason"]
    assert {(r["subject"], r["tool"]) for r in _audit(tmp_path, "c")} == {("bob", "send")}
