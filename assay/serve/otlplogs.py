"""``assay mcp serve``'s decision records as OTLP log records (docs/serve.md, "Records as OTLP
logs").

Built only when the config sets ``otel.logs``: the OpenTelemetry SDK's logs and its OTLP/HTTP
log exporter are imported then (on :class:`RecordLogs`'s creation). What it adds:

- :class:`RecordLogs`: the logger provider of the gateway (its own, not the process-wide one),
  its batch log record processor (a bounded queue, exported from a thread of its own: the trio
  thread only queues a record) and :meth:`RecordLogs.aclose` (flush, bounded as the spans');
- :class:`LinkLogs`: one per link, both a record sink and a watch. As the link's decision log
  sink (beside the file the config names, written first) it turns each decision event the
  link's session writes (``assay.tool.decision``: docs/wrap-records.md) into one log record; as
  the link's watch (in front of the traces' and the metrics' watches) it learns, per request,
  the guard's decision and, with ``otel.log_arguments``, the call's arguments redacted and
  capped as wrap's ``--log-arguments`` does (never raw), and it asks the traces' watch for the
  request's span, whose trace and span ids the log record carries.

A collector that is down or slow only loses records (the batch processor drops the oldest when
its queue is full); nothing here raises into a call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from time import time_ns
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from assay.gateway.config import Otel
from assay.serve.observe import Watch
from assay.serve.traces import SHUTDOWN_S, SpanWatch
from assay.session.effects import Sink
from assay.shells.stdio.pipes import RecordSink

if TYPE_CHECKING:
    from assay.policy.decision import Decision

__all__ = ["ARGUMENTS_MAX", "LinkLogs", "RecordLogs"]

#: the cap of the logged arguments' JSON, in bytes (wrap's ``--log-arguments-max`` default)
ARGUMENTS_MAX = 4096
#: a string in an attribute or the body is cut to this many characters
_CAP = 256
#: a line of a decision sink that may be a decision event (the others are skipped undecoded)
_DECISION_TYPE = b'"type":"assay.tool.decision"'


def _cut(value: str) -> str:
    return value if len(value) <= _CAP else value[:_CAP]


class _Data(msgspec.Struct):
    """The members of a decision event's ``data`` a log record carries (docs/wrap-records.md)."""

    tool: str | None = None
    decision: str | None = None
    matched_rule: str | None = None
    reason: str | None = None
    session: str | None = None
    server: str | None = None
    subject: str | None = None
    client_name: str | None = None
    client_version: str | None = None
    request_id: Any = None


class _Event(msgspec.Struct):
    type: str = ""
    data: _Data | None = None


_decode = msgspec.json.Decoder(_Event)
_encode = msgspec.json.Encoder()


class RecordLogs:
    """The logger of one gateway and the exporter behind it. Creating one imports the SDK's logs
    and the OTLP/HTTP log exporter (ImportError when the ``otel`` extra is not installed)."""

    def __init__(self, config: Otel, *, version: str, separator: str) -> None:
        from opentelemetry._logs import LogRecord, SeverityNumber
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        resource = Resource.create({"service.name": config.service_name, "service.version": version})
        self.provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        # the queue is bounded (OTEL_BLRP_MAX_QUEUE_SIZE, 2048 by default): memory too
        self.provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=config.logs_url, timeout=10))
        )
        self.logger = self.provider.get_logger("assay.serve", version)
        self.record = LogRecord
        self.info = SeverityNumber.INFO
        self.warn = SeverityNumber.WARN
        self.arguments = config.log_arguments
        self.separator = separator
        self._redact: Any = None
        if config.log_arguments:  # the redaction rules are compiled only when asked for
            from assay.session.records.arguments import logged_arguments

            self._redact = logged_arguments

    def link(
        self, inner: Watch | None, sinks: Mapping[Sink, RecordSink], client_ids: Mapping[int, Any] | None = None
    ) -> LinkLogs:
        """The watch and decision-log sink of one link; ``inner`` its other watch (the traces'
        and the metrics'), ``sinks`` the config's files (its decision log written first),
        ``client_ids`` the link's request ids in flight -> the ids their clients sent (what the
        records carry: docs/serve.md, "Records")."""
        return LinkLogs(self, inner, sinks.get(Sink.DECISION_LOG), client_ids)

    def redacted(self, arguments: Any) -> str:
        """The arguments as wrap's ``--log-arguments`` records them, as JSON text."""
        return _encode.encode(self._redact(arguments, ARGUMENTS_MAX)).decode("utf-8", "replace")

    async def aclose(self, timeout: float = SHUTDOWN_S) -> None:
        """Send the records still queued and stop the exporter, in a worker thread, waiting at
        most ``timeout`` seconds (as :meth:`~assay.serve.traces.Tracing.aclose`)."""

        def flush() -> None:
            self.provider.force_flush(int(timeout * 1000))
            self.provider.shutdown()

        with trio.move_on_after(timeout):
            await trio.to_thread.run_sync(flush, abandon_on_cancel=True)


class _Call:
    """What the watch learnt of one decided request, for its record."""

    __slots__ = ("outcome", "code", "method", "arguments")

    def __init__(self, outcome: str, code: str | None, method: Any, arguments: str | None) -> None:
        self.outcome = outcome
        self.code = code
        self.method = method
        self.arguments = arguments


class LinkLogs(RecordSink):
    """One link's decision-log sink (the config's file, if any, then a log record per decision
    event) and watch (the decision and arguments of each request, until its record or answer)."""

    def __init__(
        self,
        logs: RecordLogs,
        inner: Watch | None,
        file: RecordSink | None,
        client_ids: Mapping[int, Any] | None = None,
    ) -> None:
        self.name = file.name if file is not None else "decision log"
        self.logs = logs
        self.inner = inner
        self.file = file
        # the traces' watch, which knows each request's span
        self.spans = inner if isinstance(inner, SpanWatch) else None
        self._calls: dict[int, _Call] = {}
        # a record names the call by the id its client sent (two conversations may send the
        # same one): the link's ids decided under each, in order, until their record or answer
        self._client_ids = client_ids
        self._waiting: dict[tuple[str, Any], deque[int]] = {}
        self._key_of: dict[int, tuple[str, Any]] = {}

    # -- the watch ---------------------------------------------------------------------------------

    def sent(self, request_id: int) -> None:
        if self.inner is not None:
            self.inner.sent(request_id)

    def decided(self, decision: Decision, frame: Mapping[str, Any]) -> None:
        request_id = frame.get("id")
        if request_id.__class__ is int:
            arguments = None
            params = frame.get("params")
            if self.logs.arguments and isinstance(params, dict) and "arguments" in params:
                arguments = self.logs.redacted(params["arguments"])
            self._calls[request_id] = _Call(str(decision.outcome), decision.reason_code, frame.get("method"), arguments)
            sent = request_id if self._client_ids is None else self._client_ids.get(request_id, request_id)
            if sent.__class__ in (int, str):
                key = (sent.__class__.__name__, sent)
                self._forget(request_id)
                self._key_of[request_id] = key
                self._waiting.setdefault(key, deque()).append(request_id)
        if self.inner is not None:
            self.inner.decided(decision, frame)

    def done(self, request_id: int, answer: Mapping[str, Any] | None) -> None:
        self._calls.pop(request_id, None)
        self._forget(request_id)
        if self.inner is not None:
            self.inner.done(request_id, answer)

    def _forget(self, request_id: int) -> None:
        key = self._key_of.pop(request_id, None)
        if key is not None:
            waiting = self._waiting[key]
            waiting.remove(request_id)
            if not waiting:
                del self._waiting[key]

    def _link_id(self, sent: Any) -> int | None:
        """The link's id of the oldest call decided under the client's id ``sent``."""
        if sent.__class__ not in (int, str):
            return None
        waiting = self._waiting.get((sent.__class__.__name__, sent))
        if not waiting:
            return None
        request_id = waiting[0]
        self._forget(request_id)
        return request_id

    # -- the sink ----------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.file is not None:  # the file first: its failure is the run's (fail-closed)
            self.file.write(data)
        if _DECISION_TYPE not in data:
            return
        for line in data.splitlines():
            if _DECISION_TYPE in line:
                try:
                    event = _decode.decode(line)
                except msgspec.DecodeError:
                    continue
                if event.type == "assay.tool.decision" and event.data is not None:
                    self._emit(event.data)

    def _emit(self, data: _Data) -> None:
        logs = self.logs
        request_id = self._link_id(data.request_id)
        call = self._calls.pop(request_id, None) if request_id is not None else None
        attributes: dict[str, str] = {}
        if data.subject is not None:
            attributes["enduser.id"] = _cut(data.subject)
        if data.client_name is not None:
            attributes["assay.client.name"] = data.client_name
            if data.client_version is not None:
                attributes["assay.client.version"] = data.client_version
        if data.session is not None:
            attributes["assay.session"] = _cut(data.session)
        tool = data.tool or ""
        if data.server is not None:
            attributes["assay.upstream"] = data.server
        attributes["assay.tool"] = _cut(tool)
        name = tool
        if data.server is not None and (call is None or call.method == "tools/call"):
            name = data.server + logs.separator + tool  # as the client called it, as the spans say
            attributes["gen_ai.tool.name"] = _cut(name)
        outcome = call.outcome if call is not None else data.decision or ""
        attributes["assay.decision"] = outcome
        if data.matched_rule:
            attributes["assay.rule"] = _cut(data.matched_rule)
        if call is not None and call.code:
            attributes["assay.code"] = call.code
        if data.reason is not None:
            attributes["assay.reason"] = _cut(data.reason)
        if call is not None and call.arguments is not None:
            attributes["assay.arguments"] = call.arguments
        denied = outcome == "deny"
        body = f"{outcome} {_cut(name)}" + (f": {_cut(data.reason)}" if denied and data.reason else "")
        trace_id = span_id = trace_flags = None
        span = self.spans.span_of(request_id) if self.spans is not None and request_id is not None else None
        if span is not None:
            context = span.get_span_context()
            trace_id, span_id, trace_flags = context.trace_id, context.span_id, context.trace_flags
        try:
            logs.logger.emit(
                logs.record(
                    timestamp=time_ns(),
                    trace_id=trace_id,
                    span_id=span_id,
                    trace_flags=trace_flags,
                    severity_text="WARN" if denied else "INFO",
                    severity_number=logs.warn if denied else logs.info,
                    body=body,
                    attributes=attributes,
                )
            )
        except Exception:  # noqa: BLE001 - a log record lost never fails the call it records
            pass

    def close(self) -> None:
        pass  # the config's file is the gateway's to close
