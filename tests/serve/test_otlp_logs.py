"""serve's decision records as OTLP log records, as a real `assay mcp serve` process sending to
the stand-in OTLP receiver of test_traces on loopback (docs/serve.md, "Records as OTLP logs"):
one log record per decision with the user, the client, the session, the upstream, the tool, the
decision, its rule and code, and the trace and span ids of the request's span; the arguments
only with ``log_arguments``, and then redacted; without ``logs`` nothing goes to /v1/logs. The
gateway's export is flushed on SIGTERM (no timed export in these runs: the batch processors'
delay is long), so every wait is on the process's exit, never a sleep."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber

from assay.gateway.config import Otel
from assay.serve.otlplogs import RecordLogs
from assay.session.effects import Sink
from assay.shells.stdio.pipes import RecordSink

from httpsupport import open_session
from test_observe import _code
from test_traces import Receiver, _config, receiver, serving

#: a password under a key the redaction knows, and a GitHub token inside a string
SECRET = "hunter2-correct-horse"
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
ARGUMENTS = {"text": f"deploy with {TOKEN}", "password": SECRET, "count": 3}


async def _session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    return await open_session(http, url, client=("ide", "1.2"))


def _call(msg_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


async def _run(tmp_path: Path, otel: str) -> Receiver:
    """Two calls (one allowed, one denied) through a gateway with ``otel`` and a decision log
    file; the receiver once the gateway has exited on SIGTERM."""
    with receiver() as (got, endpoint):
        extra = f"otel: {{endpoint: {endpoint}, service_name: gw-logs{otel}}}\nlogs: {{decisions: decisions.jsonl}}"
        config = _config(tmp_path, extra)
        async with serving(config, 600_000) as serve:  # no timed export: the flush at the end
            http = httpx2.AsyncClient(timeout=30)
            headers = await _session(http, serve.url)
            allowed = await http.post(serve.url, json=_call(1, "local__send", ARGUMENTS), headers=headers)
            assert allowed.json()["result"]["content"][0]["text"].startswith("sent deploy"), allowed.text
            denied = await http.post(serve.url, json=_call(2, "local__delete_all", ARGUMENTS), headers=headers)
            assert _code(denied.json()) == "E_TOOL_DENIED"
            await http.aclose()
            serve.proc.send_signal(signal.SIGTERM)
            assert await trio.to_thread.run_sync(serve.proc.wait, 60) == 0
    # the decision log file is written as before, without the arguments
    lines = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    events = [e for e in lines if e["type"] == "assay.tool.decision"]
    assert [e["data"]["decision"] for e in events] == ["allow", "deny"]
    assert not any("arguments" in e["data"] for e in events)
    assert SECRET not in (tmp_path / "decisions.jsonl").read_text()
    return got


async def test_one_log_record_per_decision_joined_to_its_span(tmp_path: Path) -> None:
    got = await _run(tmp_path, ", logs: true")
    assert got.paths == {"/v1/traces", "/v1/logs"} and got.services == {"gw-logs"}
    assert len(got.logs) == 2, got.logs
    spans = {s["attrs"].get("gen_ai.tool.name"): s for s in got.spans}
    allow, deny = got.logs
    common = {
        "enduser.id": "anonymous",
        "assay.client.name": "ide",
        "assay.client.version": "1.2",
        "assay.session": "anonymous",
        "assay.upstream": "local",
    }
    assert allow["attrs"] == {
        **common,
        "assay.tool": "send",
        "gen_ai.tool.name": "local__send",
        "assay.decision": "allow",
        "assay.rule": "tools.allow",
    }
    assert (allow["body"], allow["severity"], allow["severity_text"]) == (
        "allow local__send",
        SeverityNumber.SEVERITY_NUMBER_INFO,
        "INFO",
    )
    assert deny["attrs"] == {
        **common,
        "assay.tool": "delete_all",
        "gen_ai.tool.name": "local__delete_all",
        "assay.decision": "deny",
        "assay.rule": "tools.deny",
        "assay.code": "E_TOOL_DENIED",
        "assay.reason": "Tool is explicitly denylisted by name",
    }
    assert deny["body"] == "deny local__delete_all: Tool is explicitly denylisted by name"
    assert (deny["severity"], deny["severity_text"]) == (SeverityNumber.SEVERITY_NUMBER_WARN, "WARN")
    # each record carries its request's span: the SIEM joins it to the trace
    for record, tool in ((allow, "local__send"), (deny, "local__delete_all")):
        span = spans[tool]
        assert (record["trace"], record["span"]) == (span["trace"], span["id"])
    assert allow["trace"] != deny["trace"]


async def test_arguments_only_when_asked_and_then_redacted(tmp_path: Path) -> None:
    got = await _run(tmp_path, ", logs: true, log_arguments: true")
    assert len(got.logs) == 2, got.logs
    for record in got.logs:
        logged = json.loads(record["attrs"]["assay.arguments"])
        assert logged["password"] == "[REDACTED:password]" and logged["count"] == 3
        assert logged["text"].startswith("deploy with [REDACTED:") and TOKEN not in logged["text"]
        assert SECRET not in json.dumps(record) and TOKEN not in json.dumps(record)


@pytest.mark.parametrize("otel", ["", ", logs: false"], ids=["unset", "false"])
async def test_without_logs_nothing_goes_to_v1_logs(tmp_path: Path, otel: str) -> None:
    got = await _run(tmp_path, otel)
    assert got.paths == {"/v1/traces"} and got.logs == [] and len(got.spans) == 3


class _Logger:
    def __init__(self) -> None:
        self.records: list[Any] = []

    def emit(self, record: Any) -> None:
        self.records.append(record)


class _File(RecordSink):
    def __init__(self) -> None:
        self.name = "decision log"
        self.got: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.got.append(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    data=st.dictionaries(st.text(max_size=12), _json, max_size=6),
    arguments=_json,
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=30),
    noise=st.binary(max_size=80),
)
def test_any_line_is_one_record_or_none_and_never_the_raw_arguments(
    data: dict[str, Any], arguments: Any, secret: str, noise: bytes
) -> None:
    """Whatever a decision sink is given, the link's sink writes it to the file unchanged, never
    raises, makes at most one log record per decision event, and with ``log_arguments`` a
    password among the arguments is never in it."""
    assume(secret not in json.dumps([data, arguments]))
    logs = RecordLogs(Otel(endpoint="http://127.0.0.1:9", logs=True, log_arguments=True), version="t", separator="__")
    logs.logger = _Logger()  # type: ignore[assignment]
    file = _File()
    link = logs.link(None, {Sink.DECISION_LOG: file})
    link.decided(
        _Decided(), {"id": 7, "method": "tools/call", "params": {"arguments": {"password": secret, "x": arguments}}}
    )
    event = {"type": "assay.tool.decision", "data": {**data, "request_id": 7}}
    line = json.dumps(event).encode() + b"\n"
    batch = noise + b'"type":"assay.tool.decision"\n' + line
    link.write(batch)
    assert file.got == [batch]
    records = logs.logger.records  # type: ignore[attr-defined]
    assert len(records) <= 1
    for record in records:
        assert secret not in json.dumps(record.attributes) and secret not in str(record.body)
        assert "[REDACTED:password]" in record.attributes["assay.arguments"]
    logs.provider.shutdown()


class _Decided:
    outcome = "allow"
    reason_code = None


class _Denied:
    outcome = "deny"
    reason_code = "E_TOOL_DENIED"


def test_a_record_is_matched_to_its_call_by_the_id_the_client_sent() -> None:
    """The records carry the id each client sent (docs/serve.md, "Records"), and two of a
    user's conversations on one link may send the same one: each record gets the decision of
    its own call, oldest first, and a call answered without a record leaves nothing behind."""
    logs = RecordLogs(Otel(endpoint="http://127.0.0.1:9", logs=True), version="t", separator="__")
    logs.logger = _Logger()  # type: ignore[assignment]
    client_ids: dict[int, Any] = {}
    link = logs.link(None, {}, client_ids)
    call = {"method": "tools/call", "params": {"name": "send", "arguments": {}}}
    client_ids.update({11: 5, 12: 5, 13: "5", 14: 9})  # two clients sent 5, one "5"
    link.decided(_Decided(), {"id": 11, **call})
    link.decided(_Denied(), {"id": 12, **call})
    link.decided(_Denied(), {"id": 13, **call})
    link.decided(_Decided(), {"id": 14, **call})
    link.done(14, None)  # answered, its record never came: forgotten

    def record(request_id: Any) -> bytes:
        data = {"tool": "send", "server": "local", "request_id": request_id}
        return json.dumps({"type": "assay.tool.decision", "data": data}, separators=(",", ":")).encode() + b"\n"

    for sent in ("5", 5, 5, 9):
        link.write(record(sent))
    got = [(r.attributes["assay.decision"], r.attributes.get("assay.code")) for r in logs.logger.records]  # type: ignore[attr-defined]
    assert got[:3] == [("deny", "E_TOOL_DENIED"), ("allow", None), ("deny", "E_TOOL_DENIED")]
    assert "assay.code" not in logs.logger.records[3].attributes  # type: ignore[attr-defined]
    assert link._waiting == {} and link._key_of == {}
    logs.provider.shutdown()
