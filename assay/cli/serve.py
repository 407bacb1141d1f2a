"""`assay mcp serve --config FILE [--listen HOST:PORT] [--check]` (docs/serve.md): the guard as
one Streamable HTTP endpoint for a team. The command reads the config file (capped, a regular
file), checks it whole, and either reports (``--check``) or runs the gateway
(:mod:`assay.serve.run`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import fatal

if TYPE_CHECKING:
    from assay.gateway.config import Secret, ServeConfig

CONFIG_MAX_BYTES = 1024 * 1024


def load_config(path: str) -> ServeConfig:
    """The config at ``path``; raises ConfigError (every problem one line) or InputFileError."""
    from assay.gateway.configfile import parse_config
    from assay.inputs import read_input_file

    data = read_input_file(path, limit=CONFIG_MAX_BYTES, what="config")
    base = os.path.dirname(os.path.abspath(path))
    return parse_config(data, base_dir=base, name=os.path.basename(path) or path, environ=os.environ)


def secret_problem(config: ServeConfig, secret: Secret, where: str) -> str | None:
    """Why ``secret`` cannot be read now (None: it can): a variable not set or empty, a file not
    readable. Never the secret's value."""
    from assay.inputs import InputFileError, read_input_file

    if secret.env is not None:
        return None if os.environ.get(secret.env) else f"{where}: the variable {secret.env} is not set"
    assert secret.file is not None
    path = os.path.join(config.base_dir, secret.file)
    try:
        read_input_file(path, limit=64 * 1024, what="secret")
    except InputFileError as exc:
        return f"{where}: {exc}"
    return None


def usable_problems(config: ServeConfig) -> list[str]:
    """What the config names that cannot be used now: secrets, the API key file, TLS files."""
    from assay.gateway.config import ClientCredentials, Secret, StaticHeader, TokenExchange

    found: list[str] = []

    def check(secret: Secret | None, where: str) -> None:
        if secret is not None and (problem := secret_problem(config, secret, where)):
            found.append(problem)

    for up in config.upstreams:
        for key, value in up.env:
            if isinstance(value, Secret):
                check(value, f"upstreams.{up.name}.env.{key}")
        cred = up.credential
        if isinstance(cred, StaticHeader):
            check(cred.value, f"upstreams.{up.name}.credential.value")
        elif isinstance(cred, (ClientCredentials, TokenExchange)):
            check(cred.client_secret, f"upstreams.{up.name}.credential.client_secret")
    check(config.approval_key, "approval_key")
    check(config.session_key, "session_key")
    check(config.session_key_previous, "session_key_previous")
    check(config.store_password, "store.password")
    from assay.gateway.config import ConfigError
    from assay.serve.run import read_approval_key, read_session_key, read_session_key_previous

    for given, label, read in (
        (config.approval_key, "approval_key", read_approval_key),
        (config.session_key, "session_key", read_session_key),
        (config.session_key_previous, "session_key_previous", read_session_key_previous),
    ):
        if given is not None and not any(p.startswith(label + ":") for p in found):
            try:
                read(config, os.environ)  # at least 16 bytes
            except ConfigError as exc:
                found.extend(exc.problems)
    if config.approvals is not None:
        check(config.approvals.secret, "approvals.secret")
    if config.api_keys is not None:
        from assay.auth.apikeys import parse_api_keys
        from assay.gateway.config import ConfigError
        from assay.inputs import InputFileError, read_input_file

        path = os.path.join(config.base_dir, config.api_keys.file)
        try:
            parse_api_keys(read_input_file(path, limit=1024 * 1024, what="API key file"), config.api_keys.file)
        except InputFileError as exc:
            found.append(f"identity.api_keys: {exc}")
        except ConfigError as exc:
            found.extend(exc.problems)
    if config.admin_listen is not None:  # docs/serve.md, "Health and metrics"
        import importlib.util

        from assay.serve.run import METRICS_MISSING

        if importlib.util.find_spec("prometheus_client") is None:
            found.append(METRICS_MISSING)
    if config.otel is not None:  # docs/serve.md, "Traces"
        import importlib.util

        from assay.serve.run import OTEL_MISSING

        try:
            missing = importlib.util.find_spec("opentelemetry.sdk") is None
            missing = missing or importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None
        except ModuleNotFoundError:
            missing = True
        if missing:
            found.append(OTEL_MISSING)
    for where, name in (
        ("tls.cert", config.tls_cert),
        ("tls.key", config.tls_key),
    ):
        if name is not None:
            check(Secret(file=name), where)
    return found


def migrate_store(config: ServeConfig, name: str) -> int:
    """``--migrate``: create or upgrade the Postgres store's schema (docs/serve.md, "Several
    replicas"); 0 with one line on stdout, or 2 with one line on stderr when it cannot."""
    from assay.gateway.config import ConfigError
    from assay.gateway.configfile import is_postgres

    if not is_postgres(config.store):
        print(f"{name}: the store is SQLite, which creates its own schema: nothing to migrate")
        return 0
    from assay.policy.storeapi import StoreError
    from assay.serve.run import postgres_of

    try:
        database = postgres_of(config, os.environ)
    except ConfigError as exc:
        for line in exc.problems:
            print(f"{name}: {line}", file=sys.stderr)
        return 2
    try:
        before, after = database.migrate_blocking()
    except StoreError as exc:
        return fatal(f"cannot migrate the session store: {exc.cause}")
    if before == after:
        print(f"{database.where}: the schema is at version {after}, nothing to do")
    else:
        print(f"{database.where}: the schema is at version {after} (was {before or 'none'})")
    return 0


def identity_kinds(config: ServeConfig) -> str:
    kinds = [k for k, on in (("oauth", config.oauth), ("api_keys", config.api_keys)) if on]
    return "+".join(kinds) or "none (loopback only)"


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="serve")
    def serve_command(
        *,
        config: Annotated[str, Parameter(name="--config")],
        listen: Annotated[str | None, Parameter(name="--listen")] = None,
        check: Annotated[bool, Parameter(name="--check", negative=())] = False,
        migrate: Annotated[bool, Parameter(name="--migrate", negative=())] = False,
    ) -> int:
        """Serve the guard as one Streamable HTTP endpoint (/mcp) for a team: users by OAuth or API keys, one agent session per user across the upstream servers.

        Exit codes: 0 served until SIGTERM or SIGINT, or with --check the config is usable, or with --migrate the schema is current; 1 with --check: the config is valid but something it names cannot be used now (a secret, the API key file, a TLS file) or the policy has an unknown key; 2 the config or its policy does not load (one line per problem), the session store cannot be used (its schema missing or older: run --migrate), --migrate could not migrate, or a usage error.

        Parameters
        ----------
        config
            The config file (serve.yaml; docs/serve.md, "The config file").
        listen
            HOST:PORT to listen on instead of the config's listen ([::1]:8787 for IPv6).
        check
            Load and check the config and the policy it names, print one line, and exit.
        migrate
            Create or upgrade the schema of the config's Postgres session store (docs/serve.md, "Several replicas"), print one line, and exit.
        """
        from assay.gateway.config import ConfigError
        from assay.gateway.configfile import split_listen
        from assay.inputs import InputFileError

        try:
            loaded = load_config(config)
        except InputFileError as exc:
            return fatal(f"cannot read config {config}: {exc}")
        except ConfigError as exc:
            for line in exc.problems:
                print(line, file=sys.stderr)
            return 2
        if migrate:
            return migrate_store(loaded, os.path.basename(config))
        if loaded.oauth is not None:
            from assay.auth.resource import oauth_problems

            bad = oauth_problems(loaded.oauth)
            for line in bad:
                print(f"{os.path.basename(config)}: {line}", file=sys.stderr)
            if bad:
                return 2
        if listen is not None:
            try:
                split_listen(listen)
            except ValueError as exc:
                return fatal(f"--listen {listen}: {exc}")
        from assay.cli.policy_check import load
        from assay.cli.errors import Fatal

        warnings: list[str] = []
        try:
            policy = os.path.join(loaded.base_dir, loaded.policy)
            load(policy, False, warnings.append)
        except Fatal as exc:
            print(str(exc), file=sys.stderr)
            return 2
        unusable = usable_problems(loaded)
        name = os.path.basename(config)
        if not check:
            if unusable:
                for line in unusable:
                    print(f"{name}: {line}", file=sys.stderr)
                return 2
            from assay.serve.main import serve_main

            return serve_main(loaded, listen)
        for line in warnings:
            print(line, file=sys.stderr)
        for line in unusable:
            print(f"{name}: {line}", file=sys.stderr)
        unknown = any("unknown key" in w for w in warnings)
        if unusable or unknown:
            return 1
        n = len(loaded.upstreams)
        print(f"{name}: ok ({n} upstream{'s' if n != 1 else ''}, identity: {identity_kinds(loaded)})")
        return 0
