"""serve's OpenTelemetry traces, as a real `assay mcp serve` process sending to a stand-in OTLP
receiver on loopback (docs/serve.md, "Traces"): one span per MCP request with the MCP semantic
conventions and the guard's decision, its parent from the request's ``_meta.traceparent`` or
else the HTTP ``traceparent``, the upstream given the span's own context; the last spans sent on
SIGTERM; without ``otel`` no OpenTelemetry module is imported. Every wait is on an event (a
line on the gateway's stderr, the receiver's condition), never a sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from gwsupport import POLICY, STDIO_SERVER
from test_observe import ACCEPT, Serve, _code

ASSAY = str(Path(sys.executable).parent / "assay")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER_PARENT = "b7ad6b7169203331"


class Receiver:
    """A stand-in OTLP/HTTP collector: decodes each ExportTraceServiceRequest POSTed to
    /v1/traces and keeps its spans (name -> attributes, ids, kind), and each
    ExportLogsServiceRequest POSTed to /v1/logs and its log records (docs/serve.md, "Records as
    OTLP logs"), with a condition to wait on."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.services: set[str] = set()
        self.paths: set[str] = set()
        self.changed = threading.Condition()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.spans) >= count, timeout), self.spans
            return list(self.spans)

    def take(self, body: bytes, path: str) -> None:
        if path.endswith("/v1/logs"):
            self._take_logs(body, path)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.changed:
            self.paths.add(path)
            for resource in request.resource_spans:
                for kv in resource.resource.attributes:
                    if kv.key == "service.name":
                        self.services.add(kv.value.string_value)
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(_span(span))
            self.changed.notify_all()

    def _take_logs(self, body: bytes, path: str) -> None:
        request = ExportLogsServiceRequest()
        request.ParseFromString(body)
        with self.changed:
            self.paths.add(path)
            for resource in request.resource_logs:
                for kv in resource.resource.attributes:
                    if kv.key == "service.name":
                        self.services.add(kv.value.string_value)
                for scope in resource.scope_logs:
                    for record in scope.log_records:
                        self.logs.append(_log(record))
            self.changed.notify_all()


def _log(record: LogRecord) -> dict[str, Any]:
    return {
        "body": _value(record.body),
        "severity": record.severity_number,
        "severity_text": record.severity_text,
        "trace": record.trace_id.hex(),
        "span": record.span_id.hex(),
        "attrs": {kv.key: _value(kv.value) for kv in record.attributes},
    }


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind is not None else None


def _span(span: Span) -> dict[str, Any]:
    return {
        "name": span.name,
        "kind": span.kind,
        "trace": span.trace_id.hex(),
        "id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "attrs": {kv.key: _value(kv.value) for kv in span.attributes},
        "error": span.status.code == span.status.STATUS_CODE_ERROR,
    }


@contextmanager
def receiver() -> Iterator[tuple[Receiver, str]]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            assert self.headers["content-type"] == "application/x-protobuf"
            got.take(body, self.path)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _config(tmp: Path, extra: str) -> Path:
    (tmp / "policy.yaml").write_text(POLICY)
    path = tmp / "serve.yaml"
    path.write_text(
        f"""\
policy: policy.yaml
listen: 127.0.0.1:0
state_dir: {tmp / "state"}
identity: {{none: true}}
{extra}
upstreams:
  local:
    command: [{json.dumps(sys.executable)}, {json.dumps(str(STDIO_SERVER))}]
"""
    )
    return path


@asynccontextmanager
async def serving(config: Path, delay_ms: int) -> AsyncIterator[Serve]:
    # the batch processor's own setting (OTEL_BSP_SCHEDULE_DELAY) only makes the test quicker
    env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": str(delay_ms)}
    proc = subprocess.Popen(
        [ASSAY, "mcp", "serve", "--config", str(config)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env
    )
    serve = Serve(proc)
    try:
        with trio.fail_after(60):
            serve.url = (await serve.until(lambda line: line.startswith("assay: serving "))).split()[2]
            yield serve
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _call(msg_id: int, tool: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


@pytest.mark.parametrize("admin", ["", "admin_listen: 127.0.0.1:0"], ids=["traces", "traces+metrics"])
async def test_one_span_per_request_with_the_decision_and_the_clients_parent(tmp_path: Path, admin: str) -> None:
    with receiver() as (got, endpoint):
        config = _config(tmp_path, f"otel: {{endpoint: {endpoint}, service_name: gw-test}}\n{admin}")
        async with serving(config, 50) as serve:
            http = httpx2.AsyncClient(timeout=30)
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}},
            }
            opened = await http.post(serve.url, json=init, headers=ACCEPT)
            session = opened.headers["mcp-session-id"]
            headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(serve.url, json=note, headers=headers)).status_code == 202
            header_parent = {"traceparent": f"00-{OTHER_TRACE}-{OTHER_PARENT}-01"}
            # _meta's traceparent wins over the header's
            meta = {"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "k=v"}
            allowed = await http.post(
                serve.url, json=_call(1, "local__meta", meta), headers={**headers, **header_parent}
            )
            upstream_meta = json.loads(allowed.json()["result"]["content"][0]["text"])
            denied = await http.post(
                serve.url, json=_call(2, "local__delete_all"), headers={**headers, **header_parent}
            )
            assert _code(denied.json()) == "E_TOOL_DENIED"
            listed = await http.post(
                serve.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers
            )
            assert "tools" in listed.json()["result"]

            await trio.to_thread.run_sync(got.wait_for, 4)
            await http.aclose()  # no connection left open: the drain ends at once
            serve.proc.send_signal(signal.SIGTERM)
            assert await trio.to_thread.run_sync(serve.proc.wait, 60) == 0
        assert got.paths == {"/v1/traces"} and got.services == {"gw-test"}
        spans = got.spans
        assert [s["name"] for s in spans] == [
            "initialize",
            "tools/call local__meta",
            "tools/call local__delete_all",
            "tools/list",
        ]
        assert all(s["kind"] == Span.SPAN_KIND_SERVER for s in spans)
        opening, call, deny, listing = spans
        for span in spans:
            assert span["attrs"]["enduser.id"] == "anonymous"
        assert opening["attrs"]["mcp.method.name"] == "initialize" and "mcp.session.id" not in opening["attrs"]

        assert (call["trace"], call["parent"]) == (TRACE, PARENT)
        assert call["attrs"] == {
            "mcp.method.name": "tools/call",
            "mcp.session.id": session,
            "mcp.protocol.version": "2025-06-18",
            "jsonrpc.protocol.version": "2.0",
            "jsonrpc.request.id": "1",
            "enduser.id": "anonymous",
            "gen_ai.tool.name": "local__meta",
            "gen_ai.operation.name": "execute_tool",
            "assay.upstream": "local",
            "assay.decision": "allow",
            "assay.rule": "tools.allow",
        }
        assert not call["error"]
        # the upstream got this span's own context, not the client's
        assert upstream_meta["traceparent"] == f"00-{TRACE}-{call['id']}-01"

        assert (deny["trace"], deny["parent"]) == (OTHER_TRACE, OTHER_PARENT)  # from the HTTP header
        assert deny["attrs"]["assay.decision"] == "deny"
        assert deny["attrs"]["assay.code"] == "E_TOOL_DENIED"
        assert deny["attrs"]["assay.rule"] == "tools.deny"
        assert deny["attrs"]["gen_ai.tool.name"] == "local__delete_all"
        assert deny["attrs"]["error.type"] == "tool_error" and deny["error"]

        assert listing["parent"] == "" and listing["trace"] not in (TRACE, OTHER_TRACE)  # a trace of its own
        assert listing["attrs"]["mcp.method.name"] == "tools/list" and "assay.upstream" not in listing["attrs"]
        assert "assay.decision" not in listing["attrs"]


async def test_sigterm_sends_the_spans_still_queued(tmp_path: Path) -> None:
    with receiver() as (got, endpoint):
        config = _config(tmp_path, f"otel: {{endpoint: {endpoint}/v1/traces}}")
        async with serving(config, 600_000) as serve:  # no timed export: only the flush at the end
            http = httpx2.AsyncClient(timeout=30)
            body = _call(1, "local__pid", None)
            body["params"]["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            answer = await http.post(
                serve.url,
                json=body,
                headers={
                    **ACCEPT,
                    "mcp-method": "tools/call",
                    "mcp-name": "local__pid",
                    "mcp-protocol-version": "2026-07-28",
                },
            )
            assert answer.status_code == 200, answer.text
            assert got.spans == []
            await http.aclose()
            serve.proc.send_signal(signal.SIGTERM)
            assert await trio.to_thread.run_sync(serve.proc.wait, 60) == 0
        assert len(got.spans) == 1 and got.services == {"assay-serve"}
        (span,) = got.spans
        assert span["attrs"]["mcp.method.name"] == "tools/call" and "mcp.session.id" not in span["attrs"]
        assert span["attrs"]["mcp.protocol.version"] == "2026-07-28"
        assert span["attrs"]["assay.decision"] == "allow" and span["attrs"]["assay.upstream"] == "local"


_PROBE = """\
import sys, trio
from pathlib import Path
from assay.gateway.config import ConfigError
from assay.gateway.configfile import parse_config
from assay.serve.run import run_serve
import assay.cli.serve, assay.shells.serve.server  # what the command imports

if sys.argv[2] == "missing":
    sys.modules["opentelemetry.sdk"] = None  # as if not installed

path = Path(sys.argv[1])
config = parse_config(path.read_bytes(), base_dir=str(path.parent))

async def front(**kwargs):
    print(sorted({m.split(".")[0] for m in sys.modules if m.startswith("opentelemetry")}) or "none", flush=True)

async def allow(authorization):
    raise AssertionError

try:
    trio.run(lambda: run_serve(config, listen=None, authenticate=allow, serve_http=front, warn=print))
except ConfigError as exc:
    print(*exc.problems)
"""


@pytest.mark.parametrize("otel", ["off", "on", "missing"])
def test_without_otel_no_opentelemetry_module_is_imported(tmp_path: Path, otel: str) -> None:
    config = _config(tmp_path, "otel: {endpoint: 'http://127.0.0.1:9/'}" if otel != "off" else "")
    got = subprocess.run(
        [sys.executable, "-c", _PROBE, str(config), otel], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert got.returncode == 0, got.stderr
    last = got.stdout.splitlines()[-1]
    if otel == "missing":  # one line, no traceback (exit 2 from the command)
        assert last == "otel: the traces need the OpenTelemetry SDK and OTLP exporter: pip install 'assay-mcp[otel]'"
    else:
        assert last == ("['opentelemetry']" if otel == "on" else "none"), got.stdout
