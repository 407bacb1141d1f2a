"""serve's admin listener, as a real `assay mcp serve` process (docs/serve.md, "Health and
metrics"): /healthz and /readyz (ready, then not while draining or while the store is unusable)
and the Prometheus metrics, whose counts match the calls made; without ``admin_listen`` no
metrics are kept (prometheus-client is not even imported). Every wait is on an event (a line on
the gateway's stderr), never a sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from gwsupport import POLICY, STDIO_SERVER
from httpsupport import ACCEPT, open_session

ASSAY = str(Path(sys.executable).parent / "assay")


class Serve:
    """A running `assay mcp serve`, its stderr read a line at a time in a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self.url = self.admin = ""

    async def until(self, predicate: Any) -> str:
        assert self.proc.stderr is not None
        while True:
            raw = await trio.to_thread.run_sync(self.proc.stderr.readline)
            assert raw, f"the gateway's stderr ended; it said: {self.seen}"
            line = raw.decode(errors="replace").rstrip("\n")
            self.seen.append(line)
            if predicate(line):
                return line


def _config(tmp: Path, extra: str = "", store: str | None = None) -> Path:
    (tmp / "policy.yaml").write_text(POLICY)
    path = tmp / "serve.yaml"
    path.write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:0
state_dir: {tmp / "state"}
identity: {{none: true}}
{f"store: {store}" if store else ""}
{extra}
upstreams:
  local:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]
"""
    )
    return path


@asynccontextmanager
async def serving(config: Path) -> AsyncIterator[Serve]:
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(config)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    serve = Serve(proc)
    try:
        with trio.fail_after(60):
            admin = await serve.until(lambda line: line.startswith(("assay: admin on ", "assay: serving ")))
            if admin.startswith("assay: admin on "):
                serve.admin = admin.split()[3]
                serve.url = (await serve.until(lambda line: line.startswith("assay: serving "))).split()[2]
            else:
                serve.url = admin.split()[2]
            yield serve
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


class Mcp:
    """A 2025-era session over plain HTTP: initialize, then calls (one JSON answer each)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.session = ""
        self.next = 1

    async def open(self) -> None:
        self.session = (await open_session(self.http, self.url))["mcp-session-id"]

    @property
    def headers(self) -> dict[str, str]:
        return {**ACCEPT, "mcp-session-id": self.session, "mcp-protocol-version": "2025-06-18"}

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.next,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments or {}},
        }
        got = await self.http.post(self.url, json=body, headers=self.headers)
        assert got.status_code == 200, got.text
        answer: dict[str, Any] = got.json()
        return answer


def _code(answer: dict[str, Any]) -> str | None:
    result = answer.get("result") or {}
    if not result.get("isError"):
        return None
    return str(json.loads(result["content"][1]["text"])["error_code"])


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition's samples: (name, labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(got: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return got.get((name, frozenset(labels.items())), 0.0)


async def test_health_readiness_and_metrics_of_a_real_serve_then_not_ready_while_draining(tmp_path: Path) -> None:
    config = _config(
        tmp_path, "admin_listen: 127.0.0.1:0\nlimits: {drain_timeout: 30s, max_connections_per_address: 3}"
    )
    async with serving(config) as serve, httpx2.AsyncClient(timeout=30) as http:
        assert serve.admin.startswith("http://127.0.0.1:")
        assert (await http.get(serve.admin + "/healthz")).status_code == 200
        ready = await http.get(serve.admin + "/readyz")
        assert (ready.status_code, ready.text) == (200, "ready\n")
        assert (await http.get(serve.admin + "/mcp")).status_code == 404
        assert (await http.post(serve.admin + "/metrics")).status_code == 405
        # health is on the admin listener only: the main one has /mcp and the metadata
        assert (await http.get(serve.url.removesuffix("/mcp") + "/healthz")).status_code == 404

        mcp = Mcp(http, serve.url)
        await mcp.open()
        codes = [
            _code(await mcp.call(tool)) for tool in ("local__pid", "local__pid", "local__delete_all", "local__pid")
        ]
        codes += [_code(await mcp.call("local__delete_all"))]
        codes += [_code(await mcp.call("local__read_secret")), _code(await mcp.call("local__send", {"text": "x"}))]
        assert codes == [None, None, "E_TOOL_DENIED", None, "E_TOOL_DENIED", None, "E_SEQUENCE_VIOLATION"]
        listed = await http.post(
            serve.url, json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"}, headers=mcp.headers
        )
        assert "tools" in listed.json()["result"]

        # three idle connections beside the client's one, past the per-address cap of 3: one of
        # them (whichever the server counts last) is answered 503, the others nothing
        host, port = serve.url.removeprefix("http://").removesuffix("/mcp").rsplit(":", 1)
        idle = [await trio.open_tcp_stream(host, int(port)) for _ in range(3)]
        answers: list[bytes] = []
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:

                async def read(stream: trio.SocketStream) -> None:
                    answers.append(await stream.receive_some())
                    nursery.cancel_scope.cancel()

                for stream in idle:
                    nursery.start_soon(read, stream)
        assert len(answers) == 1 and answers[0].startswith(b"HTTP/1.1 503"), answers
        scraped = await http.get(serve.admin + "/metrics")
        assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
        got = samples(scraped.text)
        assert value(got, "assay_serve_connections") == 3  # the client's one, and two idle
        assert value(got, "assay_serve_connections_refused_total") == 1
        for stream in idle:
            await stream.aclose()
        assert value(got, "assay_serve_decisions_total", decision="allow", code="") == 4
        assert value(got, "assay_serve_decisions_total", decision="deny", code="E_TOOL_DENIED") == 2
        assert value(got, "assay_serve_decisions_total", decision="deny", code="E_SEQUENCE_VIOLATION") == 1
        assert value(got, "assay_serve_requests_total", method="tools/call", outcome="ok") == 7
        assert value(got, "assay_serve_requests_total", method="tools/list", outcome="ok") == 1
        assert value(got, "assay_serve_requests_total", method="initialize", outcome="ok") == 1
        assert value(got, "assay_serve_request_seconds_count", method="tools/call") == 7
        # exactly the calls made: no decision or tools/call request counted under any other label
        assert sum(v for (name, _), v in got.items() if name == "assay_serve_decisions_total") == 7
        assert (
            sum(
                v
                for (name, labels), v in got.items()
                if name == "assay_serve_requests_total" and ("method", "tools/call") in labels
            )
            == 7
        )
        assert value(got, "assay_serve_decision_seconds_count") == 7
        # the upstream saw the 4 allowed calls, the link's initialize and the list (its pages)
        assert value(got, "assay_serve_upstream_seconds_count", upstream="local") >= 4 + 1 + 1
        # the policy's flow rule shares the user's session: every decision went through the store
        assert (
            value(got, "assay_serve_store_seconds_count", op="begin")
            + value(got, "assay_serve_store_seconds_count", op="attempt")
            >= 7
        )
        assert value(got, "assay_serve_store_errors_total", op="begin") == 0
        assert value(got, "assay_serve_sessions") == 1
        assert value(got, "assay_serve_links") == 1
        assert not any(name.startswith("assay_serve_upstream_errors") for name, _ in got if name.endswith("_total"))

        # a call held at the upstream keeps the gateway draining until the drain deadline
        async with trio.open_nursery() as nursery:
            nursery.start_soon(mcp.call, "local__wait", {"tag": "held", "hold": True})
            await serve.until(lambda line: line.startswith("arrived "))
            serve.proc.send_signal(signal.SIGTERM)
            await serve.until(lambda line: line.startswith("assay: draining"))
            draining = await http.get(serve.admin + "/readyz")
            assert (draining.status_code, draining.text) == (503, "not ready: draining\n")
            assert (await http.get(serve.admin + "/healthz")).status_code == 200
            nursery.cancel_scope.cancel()  # the client goes away: its call is cancelled, the drain ends
        code = await trio.to_thread.run_sync(serve.proc.wait, 60)
        assert code == 0, serve.seen
        with pytest.raises(httpx2.ConnectError):  # the admin listener stopped with the rest
            await http.get(serve.admin + "/healthz")


async def test_not_ready_while_the_store_is_unusable_and_its_errors_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    db.write_bytes(b"this is not a database" * 100)
    config = _config(tmp_path, "admin_listen: 127.0.0.1:0", store="sessions.db")
    async with serving(config) as serve, httpx2.AsyncClient(timeout=30) as http:
        assert (await http.get(serve.admin + "/healthz")).status_code == 200
        ready = await http.get(serve.admin + "/readyz")
        assert (ready.status_code, ready.text) == (503, "not ready: the session store does not answer\n")
        assert str(db) not in ready.text
        await serve.until(lambda line: line.startswith("assay: not ready: the session store: not a database"))
        mcp = Mcp(http, serve.url)
        await mcp.open()
        assert _code(await mcp.call("local__pid")) == "E_SESSION_STATE"  # fail closed
        got = samples((await http.get(serve.admin + "/metrics")).text)
        assert value(got, "assay_serve_decisions_total", decision="deny", code="E_SESSION_STATE") == 1
        assert (
            value(got, "assay_serve_store_errors_total", op="begin")
            + value(got, "assay_serve_store_errors_total", op="attempt")
            >= 1
        )
        db.unlink()  # the store usable again (a new database on the next call)
        ready = await http.get(serve.admin + "/readyz")
        assert (ready.status_code, ready.text) == (200, "ready\n")
        await serve.until(lambda line: line == "assay: ready: the session store answers again")
        assert _code(await mcp.call("local__pid")) is None
        await http.aclose()  # (an idle keep-alive connection would hold the drain until its deadline)
        serve.proc.send_signal(signal.SIGTERM)
        assert await trio.to_thread.run_sync(serve.proc.wait, 60) == 0


_PROBE = """\
import sys, trio
from pathlib import Path
from assay.gateway.config import ConfigError
from assay.gateway.configfile import parse_config
from assay.serve.run import run_serve

if sys.argv[2] == "missing":
    sys.modules["prometheus_client"] = None  # as if not installed

path = Path(sys.argv[1])
config = parse_config(path.read_bytes(), base_dir=str(path.parent))

async def front(**kwargs):
    kwargs["on_ready"] = None
    print("admin" if "prometheus_client" in sys.modules else "no-admin", flush=True)

async def allow(authorization):
    raise AssertionError

try:
    trio.run(lambda: run_serve(config, listen=None, authenticate=allow, serve_http=front, warn=print))
except ConfigError as exc:
    print(*exc.problems)
"""


@pytest.mark.parametrize("admin", ["off", "on", "missing"])
def test_without_admin_listen_prometheus_is_not_imported(tmp_path: Path, admin: str) -> None:
    config = _config(tmp_path, "admin_listen: 127.0.0.1:0" if admin != "off" else "")
    got = subprocess.run(
        [sys.executable, "-c", _PROBE, str(config), admin], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert got.returncode == 0, got.stderr
    last = got.stdout.splitlines()[-1]
    if admin == "missing":  # one line, no traceback (exit 2 from the command)
        assert last == "admin_listen: the metrics need prometheus-client: pip install 'assay-mcp[metrics]'"
    else:
        assert last == ("admin" if admin == "on" else "no-admin"), got.stdout
