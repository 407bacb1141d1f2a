"""``assay mcp serve`` put together (docs/serve.md): the policy, the store, the gateway, the
HTTP front. The front (:func:`assay.shells.serve.server.serve_http`) and authentication are
parameters, so the gateway runs with any front (a test's) and the command wires the real ones.
"""

from __future__ import annotations

import os
from functools import partial
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from assay.gateway.config import ConfigError, Secret, ServeConfig
from assay.gateway.connections import ConnectionGate
from assay.gateway.sealed import Sealer
from assay.gateway.contract import Authenticate, Gateway
from assay.policy.storeapi import Store
from assay.session.effects import Sink
from assay.shells.stdio.pipes import RecordSink

if TYPE_CHECKING:
    from assay.serve.gateway import ServeGateway
    from assay.serve.observe import Metrics
    from assay.serve.otlplogs import RecordLogs
    from assay.serve.traces import Tracing
    from assay.store.postgres import PostgresDatabase

#: the one line when admin_listen is set and prometheus-client is not installed
METRICS_MISSING = "admin_listen: the metrics need prometheus-client: pip install 'assay-mcp[metrics]'"
#: the one line when otel is set and the OpenTelemetry SDK or its OTLP/HTTP exporter is not installed
OTEL_MISSING = "otel: the traces need the OpenTelemetry SDK and OTLP exporter: pip install 'assay-mcp[otel]'"

__all__ = [
    "METRICS_MISSING",
    "OTEL_MISSING",
    "open_sinks",
    "postgres_of",
    "probe_of",
    "read_approval_key",
    "read_session_key",
    "read_session_key_previous",
    "run_serve",
    "sealer_of",
    "store_of",
    "stores_of",
]


def store_of(config: ServeConfig, environ: Mapping[str, str]) -> Callable[[], Store]:
    """A new store object on the config's sessions (one per link: a store holds one transaction
    at a time): ``sqlite``, the state directory's database (the one ``assay mcp session`` lists),
    the SQLite file the config names, or the Postgres database (:func:`postgres_of`; its pool is
    the caller's to close, :func:`stores_of`)."""
    return stores_of(config, environ)[0]


def stores_of(config: ServeConfig, environ: Mapping[str, str]) -> tuple[Callable[[], Store], PostgresDatabase | None]:
    """:func:`store_of` and the Postgres database its store objects share (None for SQLite).
    The SQLite store objects of one gateway take turns (:class:`~assay.serve.turns.TurnStore`);
    Postgres ones do not: the database serializes the calls of one user on the user's row and
    lets different users' calls run at once (docs/serve.md, "Several replicas")."""
    from assay.gateway.configfile import is_postgres

    if is_postgres(config.store):
        database = postgres_of(config, environ)
        return database.store, database

    from assay.statedir import state_dir
    from assay.store.sqlite import SqliteStore
    from assay.store.store import open_store

    from assay.serve.turns import Turns, TurnStore

    turns = Turns()  # the links of this gateway write one database: one at a time, queued on trio
    if config.store == "sqlite":
        directory = state_dir(config.state_dir, environ)
        return (lambda: TurnStore(open_store(directory), turns)), None
    path = os.path.join(config.base_dir, config.store)
    return (lambda: TurnStore(SqliteStore(path), turns)), None


def postgres_of(config: ServeConfig, environ: Mapping[str, str]) -> PostgresDatabase:
    """The config's Postgres database (nothing is opened yet), its password read now (one that
    cannot be read is a :class:`ConfigError` naming where it looked, never a value)."""
    from assay.serve.link import LinkError, read_secret
    from assay.store.postgres import PostgresDatabase

    password = None
    if config.store_password is not None:
        try:
            password = read_secret(config.store_password, config.base_dir, environ)
        except LinkError as exc:
            raise ConfigError([f"store.password: {exc}"]) from None
    return PostgresDatabase(config.store, password, pool=config.store_pool)


def probe_of(
    config: ServeConfig, environ: Mapping[str, str], database: PostgresDatabase | None = None
) -> Callable[[], Awaitable[None]]:
    """The readiness check of the config's store (docs/serve.md, "Health and metrics"): the
    SQLite database opened and read on a connection of its own, or the Postgres database's
    schema read; raises StoreError."""
    from assay.statedir import db_path, state_dir
    from assay.store.sqlite import SqliteStore

    if database is not None:
        from assay.policy.storeapi import StoreError

        async def ping() -> None:
            problem = await database.schema_problem()
            if problem is not None:
                raise StoreError(problem)

        return ping

    if config.store == "sqlite":
        path = db_path(state_dir(config.state_dir, environ))
    else:
        path = os.path.join(config.base_dir, config.store)
    return SqliteStore(path).ping


def read_approval_key(config: ServeConfig, environ: Mapping[str, str]) -> bytes | None:
    """The config's ``approval_key`` (its UTF-8 bytes, at least 16), read once at start; None
    when the config names none. One that cannot be read is a :class:`ConfigError`."""
    return _read_key(config, config.approval_key, "approval_key", environ)


def read_session_key(config: ServeConfig, environ: Mapping[str, str]) -> bytes | None:
    """The config's ``session_key`` (docs/serve.md, "Several replicas"), read as ``approval_key``."""
    return _read_key(config, config.session_key, "session_key", environ)


def read_session_key_previous(config: ServeConfig, environ: Mapping[str, str]) -> bytes | None:
    """The config's ``session_key_previous`` (rotation), read as ``session_key``."""
    return _read_key(config, config.session_key_previous, "session_key_previous", environ)


def sealer_of(config: ServeConfig, environ: Mapping[str, str]) -> Sealer | None:
    """What seals the 2025-era session ids with the config's ``session_key`` (its AES key
    derived here, once); None without one (random ids, known to one process)."""
    key = read_session_key(config, environ)
    if key is None:
        return None
    previous = read_session_key_previous(config, environ)
    return Sealer(key, config.limits.session_max_age_s, previous=() if previous is None else (previous,))


def _read_key(config: ServeConfig, secret: Secret | None, where: str, environ: Mapping[str, str]) -> bytes | None:
    from assay.serve.link import LinkError, read_secret

    if secret is None:
        return None
    try:
        key = read_secret(secret, config.base_dir, environ).encode("utf-8", "surrogatepass")
    except LinkError as exc:
        raise ConfigError([f"{where}: {exc}"]) from None
    if len(key) < 16:
        raise ConfigError([f"{where}: the key must be at least 16 bytes"])
    return key


def open_sinks(config: ServeConfig) -> dict[Sink, RecordSink]:
    """The config's decision and audit logs, opened for appending as wrap opens its own (rotated
    at ``log_max_bytes``); one that cannot be opened is a :class:`ConfigError`."""
    from assay.shells.stdio.rotation import LogOpenError, open_log

    sinks: dict[Sink, RecordSink] = {}
    for sink, name, what in (
        (Sink.DECISION_LOG, config.decision_log, "decision log"),
        (Sink.AUDIT_LOG, config.audit_log, "audit log"),
    ):
        if name is not None:
            try:
                sinks[sink] = open_log(os.path.join(config.base_dir, name), what, config.log_max_bytes)
            except LogOpenError as exc:
                raise ConfigError([f"logs: {exc}"]) from None
    return sinks


async def run_serve(
    config: ServeConfig,
    *,
    listen: str | None,
    authenticate: Authenticate,
    serve_http: Callable[..., Awaitable[None]],
    warn: Callable[[str], None],
    environ: Mapping[str, str] | None = None,
    **front: Any,
) -> None:
    """Load the policy (a bad one: :class:`ConfigError`, exit 2), open the store (swept while
    serving, closed at the end), build the gateway and serve until the front returns; every
    upstream is stopped on the way out. ``front``: more keyword arguments for ``serve_http``."""
    import trio

    from assay.policy import PolicyError, PolicyFileError, load_policy_file
    from assay.serve.approver import open_approver
    from assay.serve.gateway import open_gateway
    from assay.store.store import serving

    env = os.environ if environ is None else environ
    path = os.path.join(config.base_dir, config.policy)
    try:
        policy = load_policy_file(path, warn=warn)
    except (PolicyFileError, PolicyError, OSError) as exc:
        raise ConfigError([f"policy: {exc}"]) from None
    approval_key = read_approval_key(config, env)
    sealer = sealer_of(config, env)
    store_for, database = stores_of(config, env)
    if database is not None:  # a database without the schema this assay writes is not used
        problem = await database.schema_problem()
        if problem is not None:
            raise ConfigError([f"store: {problem}"])
    metrics = None
    if config.admin_listen is not None:  # docs/serve.md, "Health and metrics": only then kept
        from assay.serve.observe import Metrics, TimedStore

        try:
            metrics = Metrics()
        except ImportError:
            raise ConfigError([METRICS_MISSING]) from None
        plain = store_for

        def store_for() -> Store:
            return TimedStore(plain(), metrics)

    tracing: Tracing | None = None
    record_logs: RecordLogs | None = None
    if config.otel is not None:  # docs/serve.md, "Traces": only then is the SDK imported
        from assay import __version__
        from assay.serve.traces import Tracing

        try:
            tracing = Tracing(config.otel, version=__version__)
            if config.otel.logs:  # docs/serve.md, "Records as OTLP logs"
                from assay.serve.otlplogs import RecordLogs

                record_logs = RecordLogs(config.otel, version=__version__, separator=config.separator)
        except ImportError:
            raise ConfigError([OTEL_MISSING]) from None
    sinks = open_sinks(config)
    approver = open_approver(config, env, warn)  # docs/serve.md, "Out-of-band approvers"
    hook = approver[0] if approver is not None else None
    try:
        async with (
            serving(store_for()),
            open_gateway(
                config,
                policy,
                store_for=store_for,
                sinks=sinks,
                warn=warn,
                environ=env,
                approval_key=approval_key,
                approver=hook,
                metrics=metrics,
                tracing=tracing,
                record_logs=record_logs,
            ) as gateway,
        ):
            if metrics is not None:
                probe = probe_of(config, env, database)
                await _serve_with_admin(
                    config,
                    gateway,
                    metrics,
                    tracing,
                    probe,
                    listen,
                    authenticate,
                    serve_http,
                    warn,
                    {**front, "sealer": sealer},
                )
                return
            await serve_http(
                listen=listen or config.listen,
                gateway=gateway if tracing is None else _traced(gateway, tracing),
                authenticate=authenticate,
                limits=config.limits,
                origins=config.origins,
                resource_url=config.public_url,
                tls_cert=config.tls_cert,
                tls_key=config.tls_key,
                sealer=sealer,
                **front,
            )
    finally:
        if approver is not None:
            approver[1]()
        if tracing is not None:  # the last spans go out (at most SHUTDOWN_S), SIGTERM's drain done
            if record_logs is not None:  # and the last log records, alongside
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(record_logs.aclose)
                    await tracing.aclose()
            else:
                await tracing.aclose()
        if database is not None:
            with trio.CancelScope(shield=True):
                await database.aclose()


async def _serve_with_admin(
    config: ServeConfig,
    gateway: ServeGateway,
    metrics: Metrics,
    tracing: Tracing | None,
    probe: Callable[[], Awaitable[None]],
    listen: str | None,
    authenticate: Authenticate,
    serve_http: Callable[..., Awaitable[None]],
    warn: Callable[[str], None],
    front: dict[str, Any],
) -> None:
    """The front with the admin listener beside it (docs/serve.md, "Health and metrics"): it
    listens first, says ready once the front does, not ready from the drain on, and stops with
    the front."""
    import trio

    from assay.serve.observe import MeteredGateway, Readiness
    from assay.shells.serve.admin import Admin, serve_admin
    from assay.shells.serve.server import Bound

    assert config.admin_listen is not None
    stop = front.pop("stop", None)
    stop = stop if stop is not None else trio.Event()
    readiness = Readiness(probe, stop=stop, warn=warn)
    on_ready = front.pop("on_ready", None)

    def listening(bound: Bound) -> None:
        readiness.listening = True
        if on_ready is not None:
            on_ready(bound)

    users = gateway.users
    metrics.watch(
        sessions=lambda: sum(1 for u in users.values() for c in u.conversations.values() if not c.modern),
        users=lambda: len(users),
        links=lambda: sum(1 for u in users.values() for link in u.links.values() if link.alive),
    )
    connections = ConnectionGate(config.limits.max_connections, config.limits.max_connections_per_address)
    metrics.watch_connections(connections)
    app = Admin(ready=readiness, metrics=metrics.exposition)
    async with trio.open_nursery() as nursery:
        try:
            admin: Bound = await nursery.start(partial(serve_admin, listen=config.admin_listen, app=app))
        except (OSError, BaseExceptionGroup) as exc:
            leaf: BaseException = exc
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            if not isinstance(leaf, OSError):
                raise
            raise ConfigError(
                [f"admin_listen: cannot listen on {config.admin_listen}: {leaf.strerror or leaf}"]
            ) from None
        warn(f"assay: admin on {admin.url} (/healthz, /readyz, /metrics)")
        await serve_http(
            listen=listen or config.listen,
            gateway=_traced(MeteredGateway(gateway, metrics), tracing),
            authenticate=authenticate,
            limits=config.limits,
            origins=config.origins,
            resource_url=config.public_url,
            tls_cert=config.tls_cert,
            tls_key=config.tls_key,
            on_ready=listening,
            stop=stop,
            connections=connections,
            **front,
        )
        nursery.cancel_scope.cancel()


def _traced(gateway: Gateway, tracing: Tracing | None) -> Gateway:
    """The gateway the front is given: each request one span when traces are kept (docs/serve.md,
    "Traces"); outermost, so that the front hands it the request's headers."""
    if tracing is None:
        return gateway
    from assay.serve.traces import TracedGateway

    return TracedGateway(gateway, tracing)
