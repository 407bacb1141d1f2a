"""``assay mcp serve``'s health and metrics (docs/serve.md, "Health and metrics").

Built only when the config sets ``admin_listen``; prometheus-client is imported then, and
nothing here runs on a request otherwise (the gateway, its links and the store are the plain
ones). The session core stays sans-IO: every time is taken here, in the shells, with trio's clock:

- :class:`Metrics`: the registry and what counts into it;
- :class:`MeteredGateway`: the gateway the HTTP front is given, counting and timing each request
  a conversation answers (by method and outcome);
- :class:`LinkWatch`: one per link (a user's session with one upstream), told by the link when a
  request goes in and its answer comes back, and by the session when a call is decided
  (``SessionOptions.on_decision``): decisions by outcome and code, the time to the decision
  (policy and the store's transaction) and from there to the upstream's answer, lost links;
- :class:`TimedStore`: the store of each link, timed and its errors counted;
- :class:`Readiness`: what /readyz says (listening, not draining, the store answers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from assay.gateway.connections import ConnectionGate
from assay.gateway.contract import Conversation, Emit, Gateway, GatewayError, Identity
from assay.gateway.http import VERSION_META
from assay.gateway.router import UPSTREAM_FAILED, Route, route_of
from assay.policy.storeapi import Alive, Expect, Loaded, Saved, SessionKey, SessionRow, Store, StoreError

if TYPE_CHECKING:
    from assay.policy.decision import Decision

__all__ = ["LATENCY_BUCKETS", "LinkWatch", "MeteredGateway", "Metrics", "Readiness", "TimedStore", "Watch"]

#: the latency histograms' buckets, in seconds
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def method_label(method: Any) -> str:
    """A request's method as a label: a method the gateway routes, else ``other`` (a client
    chooses the string: the label's values stay bounded)."""
    if isinstance(method, str) and (method == "initialize" or route_of(method) is not Route.UNKNOWN):
        return method
    return "other"


class Metrics:
    """The Prometheus registry of one gateway (its own, not the process-wide default) and the
    counts that go into it. Creating one imports prometheus-client."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        from prometheus_client.core import GaugeMetricFamily  # noqa: F401 - fails early if incomplete

        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "assay_serve_requests",
            "MCP requests answered by the gateway, by method and outcome (ok, error, cancelled)",
            ["method", "outcome"],
            registry=registry,
        )
        self.request_seconds = Histogram(
            "assay_serve_request_seconds",
            "Time from a request reaching the gateway to its answer, by method",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.decisions = Counter(
            "assay_serve_decisions",
            "Calls decided by the guard, by decision (allow, allow_with_warning, deny) and code (E_*, empty for allow)",
            ["decision", "code"],
            registry=registry,
        )
        self.decision_seconds = Histogram(
            "assay_serve_decision_seconds",
            "Time from a call reaching the guard to its decision (the policy and the store's transaction)",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_seconds = Histogram(
            "assay_serve_upstream_seconds",
            "Time from a request leaving the guard (a call: once allowed) to the upstream's answer, by upstream",
            ["upstream"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.store_seconds = Histogram(
            "assay_serve_store_seconds",
            "Time of one store operation (begin, attempt, commit, abort), the wait for its turn included",
            ["op"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.store_errors = Counter(
            "assay_serve_store_errors",
            "Store operations that failed (the calls that needed them are denied E_SESSION_STATE)",
            ["op"],
            registry=registry,
        )
        self.upstream_errors = Counter(
            "assay_serve_upstream_errors",
            "Upstreams that could not be used: unavailable (could not be started or reached), lost (ended with requests waiting)",
            ["upstream", "kind"],
            registry=registry,
        )
        self.sessions = Gauge("assay_serve_sessions", "2025-era sessions (Mcp-Session-Id) open", registry=registry)
        self.users = Gauge("assay_serve_users", "Users the gateway holds state for", registry=registry)
        self.links = Gauge("assay_serve_links", "Links open (a user's session with one upstream)", registry=registry)

    def watch(self, sessions: Callable[[], int], users: Callable[[], int], links: Callable[[], int]) -> None:
        """The gauges, read at each scrape (nothing per request)."""
        self.sessions.set_function(lambda: float(sessions()))
        self.users.set_function(lambda: float(users()))
        self.links.set_function(lambda: float(links()))

    def watch_connections(self, gate: ConnectionGate) -> None:
        """The front's connections: open now, and refused over the limits since the start, read
        at each scrape (docs/serve.md, "Connections")."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        class Connections:
            def collect(self) -> Iterator[Any]:
                yield GaugeMetricFamily("assay_serve_connections", "HTTP connections open", value=gate.open)
                yield CounterMetricFamily(
                    "assay_serve_connections_refused",
                    "HTTP connections refused over limits.max_connections or max_connections_per_address",
                    value=gate.refused,
                )

        self.registry.register(Connections())

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format of everything, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def link(self, upstream: str) -> LinkWatch:
        return LinkWatch(self, upstream)

    def upstream_error(self, upstream: str, kind: str) -> None:
        self.upstream_errors.labels(upstream, kind).inc()


class Watch(Protocol):
    """What a link tells about its requests: the metrics' :class:`LinkWatch`, the traces'
    :class:`~assay.serve.traces.SpanWatch` (docs/serve.md, "Traces"), or both."""

    def sent(self, request_id: int) -> None: ...

    def decided(self, decision: Decision, frame: Mapping[str, Any]) -> None: ...

    def done(self, request_id: int, answer: Mapping[str, Any] | None) -> None: ...


class LinkWatch:
    """What one link tells the metrics: :meth:`sent` and :meth:`done` by the link, per request
    (the link's own ids); :meth:`decided` by the link's session, per decided call."""

    __slots__ = ("metrics", "upstream", "_sent", "_decided", "_upstream_seconds")

    def __init__(self, metrics: Metrics, upstream: str) -> None:
        self.metrics = metrics
        self.upstream = upstream
        self._sent: dict[int, float] = {}
        self._decided: dict[int, tuple[float, bool]] = {}  # id -> (when, denied)
        self._upstream_seconds = metrics.upstream_seconds.labels(upstream)

    def sent(self, request_id: int) -> None:
        self._sent[request_id] = trio.current_time()

    def decided(self, decision: Decision, frame: Mapping[str, Any]) -> None:
        outcome = str(decision.outcome)
        self.metrics.decisions.labels(outcome, decision.reason_code or "").inc()
        request_id = frame.get("id")
        start = self._sent.get(request_id) if request_id.__class__ is int else None
        if start is not None:
            now = trio.current_time()
            self.metrics.decision_seconds.observe(now - start)
            assert isinstance(request_id, int)
            self._decided[request_id] = (now, outcome == "deny")

    def done(self, request_id: int, answer: Mapping[str, Any] | None) -> None:
        """The request's answer (None: cancelled)."""
        start = self._sent.pop(request_id, None)
        decided = self._decided.pop(request_id, None)
        if answer is None or start is None:
            return
        failed = answer.get("error")
        if answer.get("id") is None and isinstance(failed, dict) and failed.get("code") == UPSTREAM_FAILED:
            self.metrics.upstream_error(self.upstream, "lost")  # the link's own answer: it ended
            return
        if decided is not None:
            if decided[1]:
                return  # denied: the upstream never saw it
            start = decided[0]
        self._upstream_seconds.observe(trio.current_time() - start)


class _MeteredConversation:
    """A conversation whose requests are counted and timed (the contract's Conversation)."""

    __slots__ = ("_inner", "_metrics")

    def __init__(self, inner: Conversation, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def request(self, message: dict[str, Any], related: Emit) -> dict[str, Any]:
        method = method_label(message.get("method"))
        start = trio.current_time()
        outcome = "error"
        try:
            answer = await self._inner.request(message, related)
            outcome = "error" if "error" in answer else "ok"
            return answer
        except trio.Cancelled:
            outcome = "cancelled"
            raise
        finally:
            self._metrics.requests.labels(method, outcome).inc()
            self._metrics.request_seconds.labels(method).observe(trio.current_time() - start)

    async def notify(self, message: dict[str, Any]) -> None:
        await self._inner.notify(message)

    async def listen(self, emit: Emit) -> None:
        await self._inner.listen(emit)

    async def aclose(self) -> None:
        await self._inner.aclose()


class MeteredGateway:
    """The gateway the front is given when metrics are kept: its conversations count and time
    their requests; a 2025-era ``initialize`` is counted too (a 2026-07-28 request's synthesized
    one is not: the request itself is)."""

    def __init__(self, inner: Gateway, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def open(self, who: Identity, initialize: dict[str, Any]) -> tuple[Conversation, dict[str, Any]]:
        params = initialize.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and VERSION_META in meta:
            conversation, result = await self._inner.open(who, initialize)
            return _MeteredConversation(conversation, self._metrics), result
        start = trio.current_time()
        outcome = "error"
        try:
            conversation, result = await self._inner.open(who, initialize)
            outcome = "ok"
        except trio.Cancelled:
            outcome = "cancelled"
            raise
        except GatewayError:
            raise
        finally:
            self._metrics.requests.labels("initialize", outcome).inc()
            self._metrics.request_seconds.labels("initialize").observe(trio.current_time() - start)
        return _MeteredConversation(conversation, self._metrics), result


class TimedStore:
    """A :class:`~assay.policy.storeapi.Store` whose transaction steps are timed and whose
    failures are counted (by operation)."""

    def __init__(self, store: Store, metrics: Metrics) -> None:
        self._store = store
        self._seconds = {op: metrics.store_seconds.labels(op) for op in ("begin", "attempt", "commit", "abort")}
        self._errors = metrics.store_errors

    @property
    def where(self) -> str:
        return self._store.where

    async def _timed(self, op: str, work: Awaitable[Any]) -> Any:
        start = trio.current_time()
        try:
            return await work
        except StoreError:
            self._errors.labels(op).inc()
            raise
        finally:
            self._seconds[op].observe(trio.current_time() - start)

    async def begin(self, session: SessionKey, part: str, server: str, now: float) -> Loaded:
        got: Loaded = await self._timed("begin", self._store.begin(session, part, server, now))
        return got

    async def attempt(
        self, session: SessionKey, part: str, server: str, expect: Expect, saved: Saved, now: float
    ) -> int | Loaded:
        got: int | Loaded = await self._timed("attempt", self._store.attempt(session, part, server, expect, saved, now))
        return got

    async def commit(self, saved: Saved, now: float) -> int:
        got: int = await self._timed("commit", self._store.commit(saved, now))
        return got

    async def abort(self) -> None:
        await self._timed("abort", self._store.abort())

    async def sessions(self, now: float) -> list[SessionRow]:
        return await self._store.sessions(now)

    async def reset(self, key: str, who: str, now: float) -> bool:
        return await self._store.reset(key, who, now)

    async def sweep(self, now: float, alive: Alive) -> int:
        try:
            return await self._store.sweep(now, alive)
        except StoreError:
            self._errors.labels("sweep").inc()
            raise

    async def aclose(self) -> None:
        await self._store.aclose()


class Readiness:
    """/readyz: ready once the front listens, until it drains, while ``probe`` (a cheap store
    check, raising :class:`StoreError`) succeeds within ``timeout`` seconds. Probes run one at
    a time; a failure is told once on ``warn`` (with its cause: /readyz names none)."""

    def __init__(
        self,
        probe: Callable[[], Awaitable[None]],
        *,
        stop: trio.Event,
        warn: Callable[[str], None],
        timeout: float = 3.0,
    ) -> None:
        self.probe = probe
        self.stop = stop
        self.warn = warn
        self.timeout = timeout
        self.listening = False
        self._lock = trio.Lock()
        self._failing: str | None = None

    async def __call__(self) -> str | None:
        if self.stop.is_set():
            return "draining"
        if not self.listening:
            return "starting"
        async with self._lock:
            cause: str | None = None
            with trio.move_on_after(self.timeout) as scope:
                try:
                    await self.probe()
                except StoreError as exc:
                    cause = exc.cause
            if scope.cancelled_caught:
                cause = f"no answer within {self.timeout:g} s"
            if cause != self._failing:
                if cause is not None:
                    self.warn(f"assay: not ready: the session store: {cause}")
                elif self._failing is not None:
                    self.warn("assay: ready: the session store answers again")
                self._failing = cause
        if cause is not None:
            return "the session store does not answer"
        if self.stop.is_set():
            return "draining"
        return None
