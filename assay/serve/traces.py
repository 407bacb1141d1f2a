"""``assay mcp serve``'s OpenTelemetry traces (docs/serve.md, "Traces").

Built only when the config sets ``otel``: the OpenTelemetry SDK and its OTLP/HTTP exporter are
imported then (this module imports them on :class:`Tracing`'s creation), and nothing here runs
on a request otherwise. What it adds, where the metrics hook in (:mod:`assay.serve.observe`):

- :class:`Tracing`: the tracer provider of the gateway (its own, not the process-wide one), its
  batch span processor (which exports from a thread of its own: nothing waits on the trio
  thread but the queueing of an ended span) and :meth:`Tracing.aclose` (flush, bounded);
- :class:`TracedGateway`: the gateway the front is given; each request a conversation answers is
  one span of kind server, its parent the request's ``params._meta.traceparent`` or else the
  HTTP ``traceparent`` (W3C trace context), the front's headers read from
  :data:`~assay.gateway.contract.request_headers`;
- :class:`SpanWatch`: one per link (beside, or instead of, the metrics'
  :class:`~assay.serve.observe.LinkWatch`): the span of the request a link sends upstream learns
  the upstream, and the guard's decision (``SessionOptions.on_decision``): the decision, its rule
  and its code.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import trio

from assay.gateway.config import Otel
from assay.gateway.contract import Conversation, Emit, Gateway, GatewayError, Identity, request_headers
from assay.gateway.http import VERSION_META
from assay.gateway.router import Route, route_of
from assay.serve.observe import Watch, method_label

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from assay.policy.decision import Decision

__all__ = ["SHUTDOWN_S", "SpanWatch", "TracedGateway", "Tracing"]

#: how long the gateway waits at the end for the last spans to be sent
SHUTDOWN_S = 5.0
#: a client-chosen string in an attribute or a span's name is cut to this many characters
_CAP = 256


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= _CAP else text[:_CAP]


class _Current:
    """The request a task serves, for the links it sends through: its span, and whether it goes
    to every upstream (a list: the span names no one upstream)."""

    __slots__ = ("span", "fanout")

    def __init__(self, span: Span, fanout: bool) -> None:
        self.span = span
        self.fanout = fanout


#: the request the current task serves (trio: a task started by it, such as a 2026-07-28-era
#: flight, inherits it)
_current: ContextVar[_Current | None] = ContextVar("assay_serve_span", default=None)


class Tracing:
    """The tracer of one gateway and the exporter behind it. Creating one imports the SDK and
    the exporter (ImportError when the ``otel`` extra is not installed)."""

    def __init__(self, config: Otel, *, version: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        resource = Resource.create({"service.name": config.service_name, "service.version": version})
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.traces_url, timeout=10)))
        self.tracer = self.provider.get_tracer("assay.serve", version)
        self.propagator = TraceContextTextMapPropagator()
        self.server = SpanKind.SERVER
        self.error = StatusCode.ERROR

    def link(self, upstream: str, inner: Watch | None) -> SpanWatch:
        return SpanWatch(upstream, inner)

    def start(self, name: str, carrier: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> Span:
        """A server span; its parent from ``carrier`` (``_meta``) when it has a traceparent,
        else from the HTTP headers, else none (a new trace)."""
        source: Mapping[str, Any] | None = None
        if carrier is not None and isinstance(carrier.get("traceparent"), str):
            source = carrier
        elif headers is not None and "traceparent" in headers:
            source = headers
        parent = None
        if source is not None:
            got = {k: source[k] for k in ("traceparent", "tracestate") if isinstance(source.get(k), str)}
            parent = self.propagator.extract(got)
        return self.tracer.start_span(name, context=parent, kind=self.server)

    def inject(self, span: Span, meta: dict[str, Any]) -> None:
        """``traceparent`` (and ``tracestate``) of ``span`` into ``meta``, so an upstream's own
        span is its child."""
        from opentelemetry.trace import set_span_in_context

        meta.pop("tracestate", None)
        self.propagator.inject(meta, context=set_span_in_context(span))

    async def aclose(self, timeout: float = SHUTDOWN_S) -> None:
        """Send the spans still queued and stop the exporter, in a worker thread, waiting at
        most ``timeout`` seconds (a collector that does not answer is left behind). Not
        shielded: a second signal (docs/serve.md, "Stopping") stops it at once."""

        def flush() -> None:
            self.provider.force_flush(int(timeout * 1000))
            self.provider.shutdown()

        with trio.move_on_after(timeout):
            await trio.to_thread.run_sync(flush, abandon_on_cancel=True)


class SpanWatch:
    """What one link tells the traces: the link's request ids mapped to the spans of the
    requests they serve, while in flight; ``inner`` (the metrics' watch) is told everything too."""

    __slots__ = ("upstream", "inner", "_spans")

    def __init__(self, upstream: str, inner: Watch | None) -> None:
        self.upstream = upstream
        self.inner = inner
        self._spans: dict[int, Span] = {}

    def sent(self, request_id: int) -> None:
        current = _current.get()
        if current is not None:
            self._spans[request_id] = current.span
            if not current.fanout and current.span.is_recording():
                current.span.set_attribute("assay.upstream", self.upstream)
        if self.inner is not None:
            self.inner.sent(request_id)

    def span_of(self, request_id: int) -> Span | None:
        """The span of the request the link sent as ``request_id``, while in flight (the OTLP
        log record of its decision carries its ids: docs/serve.md, "Records as OTLP logs")."""
        return self._spans.get(request_id)

    def decided(self, decision: Decision, frame: Mapping[str, Any]) -> None:
        request_id = frame.get("id")
        span = self._spans.get(request_id) if request_id.__class__ is int else None
        # a 2026-07-28-era flight in rounds outlives its first request's span: an ended span is left be
        if span is not None and span.is_recording():
            span.set_attribute("assay.decision", str(decision.outcome))
            if decision.reason_code:
                span.set_attribute("assay.code", decision.reason_code)
            if decision.matched_rule:
                span.set_attribute("assay.rule", _cut(decision.matched_rule))
        if self.inner is not None:
            self.inner.decided(decision, frame)

    def done(self, request_id: int, answer: Mapping[str, Any] | None) -> None:
        self._spans.pop(request_id, None)
        if self.inner is not None:
            self.inner.done(request_id, answer)


_TARGET = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name", "resources/read": "mcp.resource.uri"}


class _TracedConversation:
    """A conversation whose requests are each one span (the contract's Conversation)."""

    __slots__ = ("_inner", "_tracing", "_who", "_version")

    def __init__(self, inner: Conversation, tracing: Tracing, who: Identity, version: str | None) -> None:
        self._inner = inner
        self._tracing = tracing
        self._who = who
        self._version = version

    async def request(self, message: dict[str, Any], related: Emit) -> dict[str, Any]:
        tracing = self._tracing
        method = message.get("method")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        meta = meta if isinstance(meta, dict) else None
        headers = request_headers.get(None)
        label = method_label(method)
        target_key = _TARGET.get(label)
        target = params.get("name" if target_key != "mcp.resource.uri" else "uri") if target_key and params else None
        name = f"{label} {_cut(target)}" if isinstance(target, str) else label
        span = tracing.start(name, meta, headers)
        span.set_attribute("mcp.method.name", _cut(method))
        span.set_attribute("enduser.id", _cut(self._who.subject))
        span.set_attribute("jsonrpc.protocol.version", "2.0")
        if message.get("id") is not None:
            span.set_attribute("jsonrpc.request.id", _cut(message["id"]))
        if self._version is not None:
            span.set_attribute("mcp.protocol.version", _cut(self._version))
        session_id = headers.get("mcp-session-id") if headers is not None else None
        if session_id is not None and not (meta is not None and VERSION_META in meta):
            span.set_attribute("mcp.session.id", _cut(session_id))
        if target_key is not None and isinstance(target, str):
            span.set_attribute(target_key, _cut(target))
            if label == "tools/call":
                span.set_attribute("gen_ai.operation.name", "execute_tool")
        if meta is not None:  # the upstream's span is a child of this one (docs/serve.md, "Traces")
            meta = dict(meta)
            tracing.inject(span, meta)
            message = {**message, "params": {**params, "_meta": meta}}  # type: ignore[dict-item]
        token = _current.set(_Current(span, route_of(method) is Route.FANOUT if isinstance(method, str) else False))
        try:
            answer = await self._inner.request(message, related)
            failed = answer.get("error")
            result = answer.get("result")
            if isinstance(failed, dict):
                code = failed.get("code")
                span.set_attribute("error.type", _cut(code))
                span.set_attribute("rpc.response.status_code", _cut(code))
                span.set_status(tracing.error)
            elif isinstance(result, dict) and result.get("isError") is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(tracing.error)
            return answer
        except trio.Cancelled:
            span.set_attribute("error.type", "cancelled")
            raise
        except GatewayError as exc:
            span.set_attribute("error.type", _cut(exc.code))
            span.set_status(tracing.error)
            raise
        finally:
            _current.reset(token)
            span.end()

    async def notify(self, message: dict[str, Any]) -> None:
        await self._inner.notify(message)

    async def listen(self, emit: Emit) -> None:
        await self._inner.listen(emit)

    async def aclose(self) -> None:
        await self._inner.aclose()


class TracedGateway:
    """The gateway the front is given when traces are kept. ``wants_headers``: the front sets
    :data:`~assay.gateway.contract.request_headers` for each request (the traceparent and
    ``Mcp-Session-Id`` the spans read). A 2025-era ``initialize`` is a span too."""

    wants_headers = True

    def __init__(self, inner: Gateway, tracing: Tracing) -> None:
        self._inner = inner
        self._tracing = tracing

    async def open(self, who: Identity, initialize: dict[str, Any]) -> tuple[Conversation, dict[str, Any]]:
        params = initialize.get("params")
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else None
        if meta is not None and VERSION_META in meta:  # a 2026-07-28 request: its own span follows
            conversation, result = await self._inner.open(who, initialize)
            return _TracedConversation(conversation, self._tracing, who, _str(meta.get(VERSION_META))), result
        span = self._tracing.start("initialize", meta, request_headers.get(None))
        span.set_attribute("mcp.method.name", "initialize")
        span.set_attribute("enduser.id", _cut(who.subject))
        version = _str(params.get("protocolVersion"))
        if version is not None:
            span.set_attribute("mcp.protocol.version", _cut(version))
        try:
            conversation, result = await self._inner.open(who, initialize)
        except GatewayError as exc:
            span.set_attribute("error.type", _cut(exc.code))
            span.set_status(self._tracing.error)
            raise
        except trio.Cancelled:
            span.set_attribute("error.type", "cancelled")
            raise
        finally:
            span.end()
        return _TracedConversation(conversation, self._tracing, who, _str(result.get("protocolVersion"))), result


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
