"""Reading `assay mcp serve`'s config file into its model (docs/serve.md, "The config file"):
:func:`parse_config`, every problem one line (sans-IO: the command reads the file, capped, and
the secrets when the gateway starts), and the listen address's helpers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from assay.gateway.config import (
    ApiKeys,
    Approver,
    ClientCredentials,
    ConfigError,
    Credential,
    Limits,
    OAuthIdentity,
    Otel,
    Secret,
    ServeConfig,
    StaticHeader,
    TokenExchange,
    Upstream,
)
from assay.gateway.configread import _ENV_NAME, _HEADER_NAME, _NAME, _Reader, is_loopback, split_listen
from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml

__all__ = ["is_loopback", "is_postgres", "parse_config", "split_listen"]


def parse_config(
    data: bytes, *, base_dir: str, name: str = "serve.yaml", environ: Mapping[str, str] | None = None
) -> ServeConfig:
    """The config in ``data`` (docs/serve.md, "The config file"); relative paths are kept as
    written and read from ``base_dir``. Raises :class:`ConfigError` with every problem found."""
    env = {} if environ is None else environ
    r = _Reader(name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{name}: invalid UTF-8 at byte {exc.start}"]) from None
    try:
        doc = parse_yaml(text)
    except YamlSyntaxError as exc:
        where = f"{exc.line}:{exc.column}: " if exc.line is not None else ""
        raise ConfigError([f"{name}:{where}invalid YAML: {exc}".replace(":invalid", ": invalid", 1)]) from None
    except YamlStructureError as exc:
        raise ConfigError([f"{name}: {exc}"]) from None
    top = r.mapping(
        doc,
        "",
        (
            "version",
            "policy",
            "listen",
            "public_url",
            "tls",
            "origins",
            "identity",
            "store",
            "state_dir",
            "separator",
            "limits",
            "approval_key",
            "session_key",
            "session_key_previous",
            "approvals",
            "upstreams",
            "logs",
            "admin_listen",
            "otel",
        ),
    )
    if top is None:
        raise ConfigError(r.problems or [f"{name}: the config must be a mapping"])
    version = top.get("version", 1)
    if version != 1 or isinstance(version, bool):
        r.problem("version", "must be 1")
    policy = r.string(top.get("policy"), "policy", required=True)
    listen = r.string(top.get("listen"), "listen") or "127.0.0.1:8787"
    host, _port = "127.0.0.1", 8787
    try:
        host, _port = split_listen(listen)
    except ValueError as exc:
        r.problem("listen", str(exc))
    admin_listen = r.string(top.get("admin_listen"), "admin_listen")
    if admin_listen is not None:
        try:
            admin_host, admin_port = split_listen(admin_listen)
        except ValueError as exc:
            r.problem("admin_listen", str(exc))
        else:
            if (admin_host, admin_port) == (host, _port) and admin_port != 0:
                r.problem("admin_listen", "must not be the address of listen")
    public_url = r.url(top.get("public_url"), "public_url")
    otel = _otel(r, top.get("otel"))
    tls_cert = tls_key = None
    if top.get("tls") is not None:
        tls = r.mapping(top["tls"], "tls", ("cert", "key"))
        if tls is not None:
            tls_cert, tls_key = r.string(tls.get("cert"), "tls.cert"), r.string(tls.get("key"), "tls.key")
            if (tls_cert is None) != (tls_key is None):
                r.problem("tls", "cert and key go together")
    origins = r.strings(top.get("origins"), "origins") or ()
    for i, origin in enumerate(origins):
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query or parts.fragment:
            r.problem(f"origins[{i}]", "must be an origin: scheme://host[:port], nothing after it")
    oauth, api_keys, no_auth = _identity(r, top.get("identity"), public_url, host)
    store, store_password, store_pool = _store(r, top.get("store"), env)
    state_dir = r.string(top.get("state_dir"), "state_dir")
    separator = top.get("separator", "__")
    if not isinstance(separator, str) or not separator or any(c.isspace() or c == "/" for c in separator):
        r.problem("separator", "must be a non-empty string without spaces or '/'")
        separator = "__"
    limits = _limits(r, top.get("limits"))
    approval_key = r.secret(top["approval_key"], "approval_key", env) if top.get("approval_key") is not None else None
    session_key = r.secret(top["session_key"], "session_key", env) if top.get("session_key") is not None else None
    previous_key = top.get("session_key_previous")
    session_key_previous = r.secret(previous_key, "session_key_previous", env) if previous_key is not None else None
    if session_key_previous is not None and session_key is None:
        r.problem("session_key_previous", "needs a session_key (the key ids are sealed with now)")
    approvals = _approvals(r, top.get("approvals"), env)
    upstreams = _upstreams(r, top.get("upstreams"), separator, env)
    if oauth is None and (api_keys is not None or no_auth):
        # a token exchange sends the user's bearer token; API keys and no authentication give
        # none, so no user could ever use such an upstream (docs/serve.md, "Credentials to upstreams")
        for up in upstreams:
            if isinstance(up.credential, TokenExchange):
                r.problem(
                    f"upstreams.{up.name}.credential.token_exchange",
                    "needs the user's OAuth token, and identity has no oauth (API keys and no"
                    " authentication give none): no user could use this upstream",
                )
    decision_log = audit_log = None
    log_max = 16 * 1024 * 1024
    if top.get("logs") is not None:
        logs = r.mapping(top["logs"], "logs", ("decisions", "audit", "max_size"))
        if logs is not None:
            decision_log = r.string(logs.get("decisions"), "logs.decisions")
            audit_log = r.string(logs.get("audit"), "logs.audit")
            size = logs.get("max_size")
            log_max = 0 if size == 0 and not isinstance(size, bool) else r.size(size, "logs.max_size", log_max)
    if r.problems:
        raise ConfigError(r.problems)
    assert policy is not None
    return ServeConfig(
        base_dir=base_dir,
        policy=policy,
        upstreams=upstreams,
        listen=listen,
        public_url=public_url,
        tls_cert=tls_cert,
        tls_key=tls_key,
        origins=origins,
        oauth=oauth,
        api_keys=api_keys,
        no_auth=no_auth,
        store=store,
        store_password=store_password,
        store_pool=store_pool,
        state_dir=state_dir,
        separator=separator,
        limits=limits,
        approval_key=approval_key,
        session_key=session_key,
        session_key_previous=session_key_previous,
        approvals=approvals,
        decision_log=decision_log,
        audit_log=audit_log,
        log_max_bytes=log_max,
        admin_listen=admin_listen,
        otel=otel,
    )


def _otel(r: _Reader, value: Any) -> Otel | None:
    """``otel``: ``{endpoint, service_name, logs, log_arguments}`` (docs/serve.md, "Traces" and
    "Records as OTLP logs"). The endpoint is checked
    as every URL the gateway sends to: https, or http to a loopback address (a collector on this
    host, or a sidecar reached through https)."""
    if value is None:
        return None
    got = r.mapping(value, "otel", ("endpoint", "service_name", "logs", "log_arguments"))
    if got is None:
        return None
    endpoint = r.url(got.get("endpoint"), "otel.endpoint", required=True)
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.query or parts.fragment or parts.username or parts.password:
            r.problem("otel.endpoint", "must be a URL without user, query or fragment")
            endpoint = None
    name = r.string(got.get("service_name"), "otel.service_name")
    if name is not None and (len(name) > 256 or not name.isprintable()):
        r.problem("otel.service_name", "must be printable and at most 256 characters")
        name = None
    flags = {}
    for key in ("logs", "log_arguments"):
        flag = got.get(key, False)
        if not isinstance(flag, bool):
            r.problem(f"otel.{key}", "must be true or false")
            flag = False
        flags[key] = flag
    if flags["log_arguments"] and not flags["logs"] and got.get("logs", False) is False:
        r.problem("otel.log_arguments", "needs otel.logs: true (the arguments go in the OTLP log records)")
    if endpoint is None:
        return None
    return Otel(
        endpoint=endpoint, service_name=name or "assay-serve", logs=flags["logs"], log_arguments=flags["log_arguments"]
    )


def is_postgres(store: str) -> bool:
    """Whether the config's ``store`` names a Postgres database (a ``postgresql://`` URL)."""
    return store.startswith(("postgresql://", "postgres://"))


def _store(r: _Reader, value: Any, env: Mapping[str, str]) -> tuple[str, Secret | None, int]:
    """``store``: ``sqlite``, a SQLite file, a ``postgresql://`` URL, or ``{url, password, pool}``
    (docs/serve.md, "Several replicas")."""
    if value is None:
        return "sqlite", None, 10
    password: Secret | None = None
    pool = 10
    if isinstance(value, dict):
        got = r.mapping(value, "store", ("url", "password", "pool"))
        if got is None:
            return "sqlite", None, 10
        url = r.string(got.get("url"), "store.url", required=True)
        if got.get("password") is not None:
            password = r.secret(got["password"], "store.password", env)
        pool = r.count(got.get("pool"), "store.pool", 10)
        if url is None:
            return "sqlite", None, pool
        if not is_postgres(url):
            r.problem("store.url", "must be a postgresql:// URL")
            return "sqlite", None, pool
        path = "store.url"
    else:
        text = r.string(value, "store")
        if text is None:
            return "sqlite", None, 10
        if not is_postgres(text):
            return text, None, 10
        url, path = text, "store"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        r.problem(path, "is not a valid URL (postgresql://user@host:port/database)")
        return url, password, pool
    if parts.password is not None:
        # never echo it: the password is the store's secret
        r.problem(path, "a password is never written in the file: use store: {url: ..., password: {file|env}}")
    elif not (parts.hostname or "host=" in parts.query):
        r.problem(path, "the URL names no host (postgresql://user@host:port/database)")
    return url, password, pool


def _identity(
    r: _Reader, value: Any, public_url: str | None, host: str
) -> tuple[OAuthIdentity | None, ApiKeys | None, bool]:
    got = r.mapping(value, "identity", ("oauth", "api_keys", "none")) if value is not None else None
    if got is None:
        if value is None:
            r.problem("identity", "is required: oauth, api_keys, or none: true (loopback only)")
        return None, None, False
    oauth = None
    if got.get("oauth") is not None:
        o = r.mapping(
            got["oauth"],
            "identity.oauth",
            ("issuer", "jwks_url", "audience", "algorithms", "scopes", "authorization_servers", "leeway"),
        )
        if o is not None:
            issuer = r.string(o.get("issuer"), "identity.oauth.issuer", required=True)
            jwks = r.url(o.get("jwks_url"), "identity.oauth.jwks_url", required=True)
            audience = r.string(o.get("audience"), "identity.oauth.audience") or public_url
            if audience is None:
                r.problem("identity.oauth.audience", "is required when public_url is not set")
            algorithms = r.strings(o.get("algorithms"), "identity.oauth.algorithms") or ("RS256", "ES256")
            for alg in algorithms:
                if alg.lower() == "none" or alg.upper().startswith("HS"):
                    r.problem("identity.oauth.algorithms", f"{alg} is not allowed (asymmetric algorithms only)")
            scopes = r.strings(o.get("scopes"), "identity.oauth.scopes") or ()
            servers = r.strings(o.get("authorization_servers"), "identity.oauth.authorization_servers") or ()
            leeway = r.duration(o.get("leeway"), "identity.oauth.leeway", 30.0)
            if issuer and jwks and audience:
                oauth = OAuthIdentity(
                    issuer=issuer,
                    jwks_url=jwks,
                    audience=audience,
                    algorithms=algorithms,
                    scopes=scopes,
                    authorization_servers=servers or (issuer,),
                    leeway_s=leeway,
                )
    api_keys = None
    keys = got.get("api_keys")
    if keys is not None:
        if isinstance(keys, dict):
            k = r.mapping(keys, "identity.api_keys", ("file",))
            keys = k.get("file") if k is not None else None
        file = r.string(keys, "identity.api_keys")
        if file is not None:
            api_keys = ApiKeys(file=file)
    none = got.get("none", False)
    if not isinstance(none, bool):
        r.problem("identity.none", "must be true or false")
        none = False
    if none and (oauth is not None or api_keys is not None):
        r.problem("identity.none", "cannot go with oauth or api_keys")
    if none and not is_loopback(host):
        r.problem("identity.none", f"no authentication is only allowed on a loopback address, not {host}")
    if not none and oauth is None and api_keys is None and not any("identity." in p for p in r.problems):
        r.problem("identity", "needs oauth, api_keys, or none: true (loopback only)")
    return oauth, api_keys, bool(none)


def _limits(r: _Reader, value: Any) -> Limits:
    if value is None:
        return Limits()
    got = r.mapping(
        value,
        "limits",
        (
            "max_body",
            "per_user_concurrency",
            "read_timeout",
            "drain_timeout",
            "session_idle",
            "session_max_age",
            "max_connections",
            "max_connections_per_address",
            "keep_alive",
        ),
    )
    if got is None:
        return Limits()
    d = Limits()
    return Limits(
        max_body_bytes=r.size(got.get("max_body"), "limits.max_body", d.max_body_bytes),
        per_user_concurrency=r.count(
            got.get("per_user_concurrency"), "limits.per_user_concurrency", d.per_user_concurrency
        ),
        read_timeout_s=r.duration(got.get("read_timeout"), "limits.read_timeout", d.read_timeout_s),
        drain_timeout_s=r.duration(got.get("drain_timeout"), "limits.drain_timeout", d.drain_timeout_s),
        session_idle_s=r.duration(got.get("session_idle"), "limits.session_idle", d.session_idle_s),
        session_max_age_s=r.duration(got.get("session_max_age"), "limits.session_max_age", d.session_max_age_s),
        keep_alive_s=_above_zero(r, got.get("keep_alive"), "limits.keep_alive", d.keep_alive_s),
        max_connections=r.count(got.get("max_connections"), "limits.max_connections", d.max_connections),
        max_connections_per_address=r.count(
            got.get("max_connections_per_address"), "limits.max_connections_per_address", d.max_connections_per_address
        ),
    )


def _above_zero(r: _Reader, value: Any, path: str, default: float) -> float:
    """A duration above zero (a keep-alive of zero would close a connection before its first
    request could arrive)."""
    got = r.duration(value, path, default)
    if got <= 0:
        r.problem(path, "must be above zero")
        return default
    return got


def _approvals(r: _Reader, value: Any, environ: Mapping[str, str]) -> Approver | None:
    """``approvals``: an out-of-band approver (docs/serve.md, "Out-of-band approvers")."""
    if value is None:
        return None
    got = r.mapping(value, "approvals", ("approver", "url", "secret", "timeout"))
    if got is None:
        return None
    kind = got.get("approver")
    if kind not in ("webhook", "queue"):
        r.problem("approvals.approver", "is required: webhook or queue")
        return None
    timeout = None
    if got.get("timeout") is not None:
        timeout = r.duration(got["timeout"], "approvals.timeout", 0.0)
        if timeout <= 0 and not any(p.startswith(f"{r.name}: approvals.timeout:") for p in r.problems):
            r.problem("approvals.timeout", "must be above zero")
    if kind == "queue":
        for key in ("url", "secret"):
            if key in got:
                r.problem(f"approvals.{key}", "is for a webhook approver, not the queue")
        return Approver("queue", timeout_s=timeout)
    url = r.url(got.get("url"), "approvals.url", required=True)
    secret = r.secret(got["secret"], "approvals.secret", environ) if got.get("secret") is not None else None
    return None if url is None else Approver("webhook", url=url, secret=secret, timeout_s=timeout)


def _upstreams(r: _Reader, value: Any, separator: str, environ: Mapping[str, str]) -> tuple[Upstream, ...]:
    if value is None:
        r.problem("upstreams", "is required: at least one upstream server")
        return ()
    if not isinstance(value, dict) or not value:
        r.problem("upstreams", "must be a non-empty mapping of names to servers")
        return ()
    out = []
    for name, spec in value.items():
        path = f"upstreams.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 64:
            r.problem(path, "a name is letters, digits, '_' and '-', starting with a letter or digit (at most 64)")
            continue
        if separator in name:
            r.problem(path, f"a name must not contain the separator {separator!r}")
            continue
        got = r.mapping(spec, path, ("command", "env", "cwd", "url", "credential", "idle_timeout", "connect_timeout"))
        if got is None:
            continue
        command = r.strings(got.get("command"), f"{path}.command") or ()
        url = r.url(got.get("url"), f"{path}.url")
        if bool(command) == (url is not None or got.get("url") is not None):
            r.problem(path, "needs exactly one of command (a list of strings) or url")
        env: list[tuple[str, Secret | str]] = []
        if got.get("env") is not None:
            if not isinstance(got["env"], dict):
                r.problem(f"{path}.env", "must be a mapping of variable names to values")
            else:
                for key, val in got["env"].items():
                    if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
                        r.problem(f"{path}.env", f"{key!r} is not an environment variable's name")
                    elif isinstance(val, str):
                        env.append((key, val))
                    else:
                        s = r.secret(val, f"{path}.env.{key}", environ)
                        if s is not None:
                            env.append((key, s))
        if url is not None and (env or got.get("cwd") is not None):
            r.problem(path, "env and cwd are for a command, not a url")
        credential = _credential(r, got.get("credential"), f"{path}.credential", environ)
        if credential is not None and command:
            r.problem(f"{path}.credential", "is for a url upstream (a command gets env)")
        out.append(
            Upstream(
                name=name,
                command=command,
                env=tuple(env),
                cwd=r.string(got.get("cwd"), f"{path}.cwd"),
                url=url,
                credential=credential,
                idle_timeout_s=r.duration(got.get("idle_timeout"), f"{path}.idle_timeout", 600.0),
                connect_timeout_s=r.duration(got.get("connect_timeout"), f"{path}.connect_timeout", 10.0),
            )
        )
    return tuple(out)


def _credential(r: _Reader, value: Any, path: str, environ: Mapping[str, str]) -> Credential | None:
    if value is None:
        return None
    got = r.mapping(value, path, ("header", "prefix", "value", "client_credentials", "token_exchange"))
    if got is None:
        return None
    kinds = [k for k in ("header", "client_credentials", "token_exchange") if k in got]
    if len(kinds) != 1:
        r.problem(path, "exactly one of header (with value), client_credentials or token_exchange")
        return None
    if kinds[0] == "header":
        header = r.string(got.get("header"), f"{path}.header", required=True)
        if header is not None and not _HEADER_NAME.fullmatch(header):
            r.problem(f"{path}.header", "is not an HTTP header name")
        prefix = got.get("prefix", "")
        if not isinstance(prefix, str) or any(c in prefix for c in "\r\n"):
            r.problem(f"{path}.prefix", "must be a string on one line")
            prefix = ""
        if "value" not in got:
            r.problem(f"{path}.value", "is required: {file: PATH} or {env: VARIABLE}")
            return None
        secret = r.secret(got["value"], f"{path}.value", environ)
        return None if header is None or secret is None else StaticHeader(header=header, value=secret, prefix=prefix)
    kind = kinds[0]
    known = ("token_url", "client_id", "client_secret", "scope", "audience")
    body = r.mapping(got[kind], f"{path}.{kind}", known)
    if body is None:
        return None
    token_url = r.url(body.get("token_url"), f"{path}.{kind}.token_url", required=True)
    client_id = r.string(body.get("client_id"), f"{path}.{kind}.client_id", required=True)
    if body.get("client_secret") is None:
        r.problem(f"{path}.{kind}.client_secret", "is required: {file: PATH} or {env: VARIABLE}")
        return None
    secret = r.secret(body["client_secret"], f"{path}.{kind}.client_secret", environ)
    scope = r.string(body.get("scope"), f"{path}.{kind}.scope")
    audience = r.string(body.get("audience"), f"{path}.{kind}.audience", required=kind == "token_exchange")
    if token_url is None or client_id is None or secret is None:
        return None
    if kind == "client_credentials":
        return ClientCredentials(token_url, client_id, secret, scope=scope, audience=audience)
    if audience is None:
        return None
    return TokenExchange(token_url, client_id, secret, audience=audience, scope=scope)
