"""The types of `assay mcp serve`'s config file (docs/serve.md, "The config file").

The model only; :mod:`assay.gateway.configfile` reads the file's bytes into it. Secrets are never values of the file: a
:class:`Secret` names a file or an environment variable, read when the gateway starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ApiKeys",
    "Approver",
    "ClientCredentials",
    "ConfigError",
    "Limits",
    "OAuthIdentity",
    "Secret",
    "ServeConfig",
    "StaticHeader",
    "TokenExchange",
    "Upstream",
]


class ConfigError(ValueError):
    """The config is not valid: ``problems`` has one line per problem (exit 2)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Secret:
    """Where a secret comes from: exactly one of a file (its content, trailing newline stripped)
    or an environment variable."""

    file: str | None = None
    env: str | None = None


@dataclass(frozen=True)
class OAuthIdentity:
    """Users by OAuth 2.1 bearer tokens (JWTs) from one issuer (docs/serve.md, "Identity")."""

    issuer: str
    jwks_url: str
    #: the resource identifier this gateway is (``aud`` must hold it); default: ``public_url``
    audience: str
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    #: scopes every request needs (403 ``insufficient_scope`` when one is missing)
    scopes: tuple[str, ...] = ()
    #: the authorization servers named in the protected-resource metadata; default: (issuer,)
    authorization_servers: tuple[str, ...] = ()
    leeway_s: float = 30.0


@dataclass(frozen=True)
class ApiKeys:
    """API keys for small teams: a file of ``<id> sha256:<hex> [claim=value ...]`` lines."""

    file: str


@dataclass(frozen=True)
class StaticHeader:
    """An upstream credential sent as one header, its value a secret."""

    header: str
    value: Secret
    #: prefix of the value (``"Bearer "``)
    prefix: str = ""


@dataclass(frozen=True)
class ClientCredentials:
    """The gateway's own OAuth client credentials to an upstream."""

    token_url: str
    client_id: str
    client_secret: Secret
    scope: str | None = None
    audience: str | None = None


@dataclass(frozen=True)
class TokenExchange:
    """Per-user token exchange (RFC 8693): the user's token as the subject token, the upstream
    as the audience; the result cached per user and audience until it expires."""

    token_url: str
    client_id: str
    client_secret: Secret
    audience: str
    scope: str | None = None


Credential = StaticHeader | ClientCredentials | TokenExchange


@dataclass(frozen=True)
class Upstream:
    """One upstream server: a command (stdio, started per user) or a URL (Streamable HTTP/SSE)."""

    name: str
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, Secret | str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    credential: Credential | None = None
    #: a stdio upstream of a user is stopped after this long without a request
    idle_timeout_s: float = 600.0
    connect_timeout_s: float = 10.0

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 4 * 1024 * 1024
    #: requests of one user in flight at once; past it 429 with Retry-After
    per_user_concurrency: int = 32
    #: a client that has not sent its whole request by then gets 408
    read_timeout_s: float = 30.0
    #: SIGTERM: pending requests get this long to be answered
    drain_timeout_s: float = 10.0
    #: a 2025-era session without a request for this long is forgotten
    session_idle_s: float = 3600.0
    #: a sealed 2025-era session id (``session_key``) is refused this long after ``initialize``
    session_max_age_s: float = 86400.0
    #: a connection without a request (since it opened, or since its last answer) is closed
    #: after this long (docs/serve.md, "How a request flows")
    keep_alive_s: float = 30.0
    #: connections open at once, in all and from one peer address; past either, a new connection
    #: is answered 503 and closed (docs/serve.md, "Connections")
    max_connections: int = 1024
    max_connections_per_address: int = 256


@dataclass(frozen=True)
class Approver:
    """An out-of-band approver (docs/serve.md, "Out-of-band approvers"): the calls that need
    approval are asked of it, not of the user's client. ``webhook``: a POST to ``url`` answered
    allow or deny, signed with ``secret`` when given; ``queue``: a queue in the state directory
    that ``assay mcp approvals`` answers."""

    kind: Literal["webhook", "queue"]
    url: str | None = None
    secret: Secret | None = None
    #: how long a call waits for the approver before it is denied; None: the policy's approval_timeout
    timeout_s: float | None = None


@dataclass(frozen=True)
class Otel:
    """``otel``: a span per MCP request, sent over OTLP/HTTP (docs/serve.md, "Traces")."""

    #: the collector's OTLP/HTTP base URL (https, or http to a loopback address); the spans go to
    #: its ``/v1/traces`` (the URL as given when it already ends so)
    endpoint: str
    #: the spans' ``service.name``
    service_name: str = "assay-serve"
    #: the decision records go to the collector as OTLP log records too, to its ``/v1/logs``
    #: (docs/serve.md, "Records as OTLP logs")
    logs: bool = False
    #: those log records carry the call's arguments, redacted and capped as wrap's
    #: ``--log-arguments`` (docs/wrap-records.md, "Logged arguments"); only with ``logs``
    log_arguments: bool = False

    @property
    def traces_url(self) -> str:
        if self.endpoint.rstrip("/").endswith("/v1/traces"):
            return self.endpoint
        return self.endpoint.rstrip("/") + "/v1/traces"

    @property
    def logs_url(self) -> str:
        """``/v1/logs`` beside the traces' ``/v1/traces``."""
        return self.traces_url[: -len("/v1/traces")] + "/v1/logs"


@dataclass(frozen=True)
class ServeConfig:
    #: the config file's directory: relative paths in the file are read from here
    base_dir: str
    #: the guard's policy file (the same policy format as wrap: docs/policy.md)
    policy: str
    upstreams: tuple[Upstream, ...]
    listen: str = "127.0.0.1:8787"
    #: the gateway's public URL of /mcp (the resource of the protected-resource metadata)
    public_url: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    #: allowed ``Origin`` values; a request without Origin is allowed (not a browser)
    origins: tuple[str, ...] = ()
    oauth: OAuthIdentity | None = None
    api_keys: ApiKeys | None = None
    #: no authentication at all (refused unless ``listen`` is a loopback address)
    no_auth: bool = False
    #: the session store: ``sqlite`` (the state directory's), a path to a SQLite file, or a
    #: ``postgresql://`` URL (docs/serve.md, "Several replicas"; never with a password in it)
    store: str = "sqlite"
    #: the Postgres store's password (None: libpq's own, PGPASSWORD or ~/.pgpass)
    store_password: Secret | None = None
    #: the Postgres store's connection pool: at most this many connections per gateway
    store_pool: int = 10
    state_dir: str | None = None
    separator: str = "__"
    limits: Limits = field(default_factory=Limits)
    #: HMAC key of 2026-era approval requestState (docs/serve.md, "Approvals")
    approval_key: Secret | None = None
    #: the key that seals 2025-era session ids, so any replica goes on with a session
    #: (docs/serve.md, "Several replicas"); None: random ids, known to one process
    session_key: Secret | None = None
    #: the key before ``session_key``: ids it sealed still open until they expire (rotation)
    session_key_previous: Secret | None = None
    #: an out-of-band approver (docs/serve.md, "Out-of-band approvers"); None: the client is asked
    approvals: Approver | None = None
    #: the decision log and the audit log (wrap's records, with the user: docs/serve.md,
    #: "Records"); relative to the config's directory; rotated at ``log_max_bytes`` (0: never)
    decision_log: str | None = None
    audit_log: str | None = None
    log_max_bytes: int = 16 * 1024 * 1024
    #: the admin listener (``host:port``): /healthz, /readyz and the Prometheus metrics
    #: (docs/serve.md, "Health and metrics"); None: none, and no metrics are kept
    admin_listen: str | None = None
    #: the OpenTelemetry traces (docs/serve.md, "Traces"); None: none, and the SDK is not imported
    otel: Otel | None = None
