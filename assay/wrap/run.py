"""`assay mcp wrap` start to end: checks, policy, sinks, spawn, relay.

The rules are in docs/wrap.md ("Options", "Logs", "One-run outputs and session reports",
"Lifecycle and exit status").

:func:`run_wrap` is the library entry for trio programs; the CLI builds a :class:`WrapConfig`
and prints :class:`WrapError` as ``fatal: ...`` (exit 2). Every check that can fail runs before
the child is spawned, so a refused run leaves no child and no output behind.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assay import proc
from assay.shells.stdio.outputs import OneRunPlan, OutputError, check_before_spawn, create_exclusive
from assay.session.effects import Sink
from assay.session.reports import new_session_id, pretty_json, session_context
from assay.wrap.errors import WrapError as WrapError  # (re-exported: the library's error)
from assay.wrap.finish import finish_reports
from assay.wrap.options import (  # noqa: F401  (DEFAULT_LABEL, DEFAULT_SHUTDOWN_GRACE: older imports)
    APPEND,
    CREATE_NEW,
    DEFAULT_LABEL,
    DEFAULT_SHUTDOWN_GRACE,
    STRICT_DEPRECATIONS_ENV,
    WRAP_OPTIONS,
    WrapOptions,
)
from assay.wrap.sharing import SharingError, shared_for

if TYPE_CHECKING:  # the relay, the session and trio are imported when the run starts (run_prepared)
    import trio

    from assay.policy import Policy
    from assay.policy.files import DocumentCache
    from assay.policy.storeapi import SessionKey, Store
    from assay.proc.keeper import Forked
    from assay.shells.upstream_http.target import Target
    from assay.shells.stdio.pipes import RecordSink
    from assay.session.session import SessionOptions

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")


@dataclass(kw_only=True)
class WrapConfig(WrapOptions):
    """Everything one wrap run needs: every option of :class:`assay.wrap.options.WrapOptions`
    (declared there, once), plus ``argv``, the command after ``--``, untouched, and ``env``, the
    server's environment (library callers only; None: wrap's own)."""

    argv: list[str]
    env: dict[str, str] | None = None

    def create_new_outputs(self) -> dict[str, str]:
        """flag -> path of every create-new output that was asked for."""
        return self._outputs(CREATE_NEW)

    def append_outputs(self) -> dict[str, str]:
        """flag -> path of every append log that was asked for."""
        return self._outputs(APPEND)

    def _outputs(self, kind: str) -> dict[str, str]:
        rows = ((opt.flag, getattr(self, opt.field)) for opt in WRAP_OPTIONS if opt.output == kind)
        return {flag: path for flag, path in rows if path}

    def session_options(self, *, event_source: str | None, declared_manifest: dict[str, Any] | None) -> SessionOptions:
        """The session's options from this run's (the one place they are built): the event
        source as checked, the declared manifest as read (docs/wrap.md, "Options")."""
        decision_sinks = tuple(
            sink
            for sink, path in ((Sink.DECISION_LOG, self.decision_log), (Sink.DECISION_LOG_NEW, self.decision_log_new))
            if path
        )
        from assay.session.session import SessionOptions

        return SessionOptions(
            dry_run=self.dry_run,
            verbose=self.verbose,
            label=self.label,
            event_source=event_source,
            decision_sinks=decision_sinks,
            audit=bool(self.audit_log),
            keep_events=bool(self.coverage_out),
            receipts=bool(self.request_receipts_out),
            max_frame_bytes=self.max_frame_bytes,
            shutdown_grace=self.shutdown_grace,
            declared_manifest=declared_manifest,
            hide_denied_tools=self.hide_denied_tools,
            log_arguments_max=self.log_arguments_max if self.log_arguments else None,
            announce_exit=self.url is None,
        )


def default_event_source(label: str) -> str:
    """``assay://local/<label>``: the event source of a wrap given none (docs/wrap.md, "Logs").
    The label is one path segment, every character but ``A-Z a-z 0-9 - . _ ~`` percent-encoded
    as UTF-8 (a label that was not UTF-8 on the command line as its original bytes); an empty
    label counts as the default one."""
    from urllib.parse import quote

    try:
        raw = label.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no command line gives (a library caller's)
        raw = label.encode("utf-8", "surrogatepass")
    return "assay://local/" + quote(raw or DEFAULT_LABEL.encode("ascii"), safe="")


def validate_event_source(value: str | None, logging_enabled: bool, label: str = DEFAULT_LABEL) -> str | None:
    """Trimmed; :func:`default_event_source` with any log sink when none is given; checked
    whenever given (docs/wrap.md, "Options", "Logs")."""
    source = (value or "").strip() or None
    if source is None:
        return default_event_source(label) if logging_enabled else None
    scheme, sep, _rest = source.partition("://")
    if any(ch.isspace() for ch in source) or not sep or not scheme or not _SCHEME.match(scheme):
        raise WrapError(
            f"invalid --event-source {json.dumps(source, ensure_ascii=False)}: "
            "expected an absolute URI like assay://org/app"
        )
    return source


def load_policy_file(
    path: str,
    *,
    strict_deprecations: bool,
    warn: Callable[[str], None],
    limit: int | None = None,
    cache: DocumentCache | None = None,
) -> Policy:
    """Read and load the policy; missing means fatal, never allow-all (docs/wrap.md, "Startup").

    The read, the ceiling (``limit``, default ``ASSAY_MCP_MAX_POLICY_BYTES``), the YAML budget
    and the messages are :func:`assay.policy.load_policy_file`'s, as for every command;
    ``cache``: wrap's parsed documents (docs/wrap.md, "The policy cache")."""
    from assay.policy import PolicyError, PolicyFileError
    from assay.policy import load_policy_file as load

    if not os.path.exists(path):  # a dangling symlink counts as missing
        raise WrapError(
            f"Policy file not found at {path}. Aborting instead of using insecure default (allow-all) policy."
        )
    try:
        return load(
            path,
            strict_deprecations=strict_deprecations,
            warn=warn,
            limit=limit,
            on_read=lambda p: warn(f"[assay] loading policy from {p}"),
            cache=cache,
        )
    except (PolicyFileError, PolicyError) as exc:
        raise WrapError(str(exc)) from None


def strict_deprecations(config: WrapConfig, environ: Mapping[str, str]) -> bool:
    """Strict mode: ``--deny-deprecations`` or ``ASSAY_STRICT_DEPRECATIONS=1`` (docs/wrap.md,
    "Options"; docs/policy.md, "Migrating from v1")."""
    return config.deny_deprecations or environ.get(STRICT_DEPRECATIONS_ENV) == "1"


def child_environment(config: WrapConfig, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The environment of the wrapped server: ``config.env`` when given, else ``environ`` with
    ``ASSAY_STRICT_DEPRECATIONS=1`` added under ``--deny-deprecations``, so that a wrapped
    ``assay mcp server`` inherits the strict mode (docs/wrap.md, "Options"). None: this
    process's environment, inherited as is."""
    if config.env is not None:
        return config.env
    add = config.deny_deprecations and environ.get(STRICT_DEPRECATIONS_ENV) != "1"
    if not add and environ is os.environ:
        return None
    env = dict(environ)
    if add:
        env[STRICT_DEPRECATIONS_ENV] = "1"
    return env


def load_declared_manifest(path: str, label: str) -> dict[str, Any]:
    """Read and validate ``--declared-manifest`` (docs/wrap.md, "Declared baseline"): a regular
    file within the 1 MiB manifest ceiling, a valid ``assay.declared_mcp_manifest.v0`` whose
    ``server.id``, when it has one, is this run's ``--label`` (as the observed manifest writes
    it). Anything else is a :class:`WrapError`, before the server is spawned."""
    from assay.manifest.core import ManifestError
    from assay.manifest.declared import parse_declared
    from assay.manifest.files import read_bounded
    from assay.manifest.observed import sanitize_display

    try:
        data = read_bounded(path)
    except ManifestError as exc:
        raise WrapError(f"--declared-manifest: {exc}") from None
    try:
        declared = parse_declared(data)
    except ManifestError as exc:
        raise WrapError(f"--declared-manifest {path}: {exc}") from None
    server = declared["server"]
    if server is not None and server["id"] != sanitize_display(label):
        raise WrapError(
            f"--declared-manifest {path} declares the tools of server "
            f"{json.dumps(server['id'])}, not of --label "
            f"{json.dumps(label)}"
        )
    return declared


def _open_append(path: str, what: str, max_bytes: int) -> RecordSink:
    from assay.shells.stdio.rotation import LogOpenError, open_log

    try:
        return open_log(path, what, max_bytes)
    except LogOpenError as exc:
        raise WrapError(str(exc)) from None


def _stderr(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def command_banner(argv: list[str]) -> str:
    """`[assay] wrapping command: <command> ["arg", ...]` (docs/wrap.md, "Options")."""
    args = "[" + ", ".join(json.dumps(a, ensure_ascii=False) for a in argv[1:]) + "]"
    return f"[assay] wrapping command: {argv[0]} {args}"


@dataclass
class Prepared:
    """A wrap run that passed every check made before the server starts (:func:`prepare_wrap`):
    the policy and what was read with it, and the append logs, opened (closed by
    :func:`run_prepared`, or by :meth:`close`)."""

    config: WrapConfig
    environ: Mapping[str, str]
    target: Target | None
    policy: Policy
    declared: dict[str, Any] | None
    source: str | None
    key: SessionKey | None
    shared: tuple[Store, SessionKey] | None
    session_id: str
    context_bytes: bytes
    sinks: dict[Sink, RecordSink]

    def close(self) -> None:
        for sink in self.sinks.values():
            sink.close()


def prepare_wrap(
    config: WrapConfig, *, warn: Callable[[str], None] = _stderr, environ: Mapping[str, str] | None = None
) -> Prepared:
    """Every check of a wrap run before its server starts, and the policy loaded (docs/wrap.md,
    "Startup"); raises :class:`WrapError`. No trio (for a command): `assay mcp wrap` calls this
    before it imports trio, starts the server, and imports the relay while the server starts
    (docs/testing.md, "Start-up of `assay mcp wrap`")."""
    if config.url is not None and config.argv:
        raise WrapError("--url and a command after -- exclude each other: give one")
    if not config.argv and config.url is None:
        raise WrapError("no command to wrap (give it after --, or give --url)")
    if config.max_frame_bytes < 1:
        raise WrapError("--max-frame-bytes must be a positive integer")
    if config.log_arguments_max < 1:
        raise WrapError("--log-arguments-max must be a positive integer")
    if config.log_max_bytes < 0:
        raise WrapError("--log-max-bytes must be 0 (never rotate) or a positive integer")
    if not (math.isfinite(config.shutdown_grace) and config.shutdown_grace >= 0):
        raise WrapError("--shutdown-grace must be a non-negative number of seconds")
    from assay.inputs import policy_byte_limit
    from assay.wrap.policycache import policy_cache

    env = os.environ if environ is None else environ
    target = None
    if config.url is not None:  # docs/remote.md: nothing of it is imported for a command
        from assay.wrap import remote

        target = remote.target_of(config, env)
    policy = load_policy_file(
        config.policy_path,
        strict_deprecations=strict_deprecations(config, env),
        warn=warn,
        limit=policy_byte_limit(env),
        cache=policy_cache(config.state_dir, env),
    )
    declared = load_declared_manifest(config.declared_manifest, config.label) if config.declared_manifest else None
    try:  # refused before spawn: docs/wrap.md, "One-run outputs and session reports"
        check_before_spawn(config.create_new_outputs(), config.append_outputs())
    except OutputError as exc:
        raise WrapError(str(exc)) from None
    logging_enabled = bool(
        config.decision_log
        or config.audit_log
        or config.decision_log_new
        or config.coverage_out
        or config.state_window_out
    )
    source = validate_event_source(config.event_source, logging_enabled, config.label)
    try:  # docs/wrap.md, "Shared sessions"
        key, shared = shared_for(
            policy, config.shared_session, config.state_dir, config.session_lock_timeout, env, warn
        )
    except SharingError as exc:
        raise WrapError(str(exc)) from None
    session_id = new_session_id()
    context_bytes = b""
    if config.session_context_out:
        try:  # computed before spawn: an argument that is not valid UTF-8 cannot be digested
            argv = config.argv if target is None else target.digest_argv()
            context_bytes = pretty_json(session_context(argv, dry_run=config.dry_run))
        except ValueError as exc:
            raise WrapError(f"--session-context-out: {exc}") from None
    prepared = Prepared(config, env, target, policy, declared, source, key, shared, session_id, context_bytes, {})
    try:
        if config.decision_log:
            prepared.sinks[Sink.DECISION_LOG] = _open_append(config.decision_log, "decision log", config.log_max_bytes)
        if config.audit_log:
            prepared.sinks[Sink.AUDIT_LOG] = _open_append(config.audit_log, "audit log", config.log_max_bytes)
    except BaseException:
        prepared.close()
        raise
    if config.dry_run:
        warn("[assay] DRY RUN MODE: No actions will be blocked.")
    warn(command_banner(config.argv) if target is None else remote.banner(target))
    return prepared


async def run_wrap(
    config: WrapConfig,
    *,
    client_in: trio.abc.ReceiveStream | None = None,
    client_out: trio.abc.SendStream | None = None,
    warn: Callable[[str], None] = _stderr,
    handle_signals: bool = True,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run one wrap session; returns the exit status (docs/wrap.md, "Exit status").

    Raises :class:`WrapError` on a fatal startup error (nothing spawned then). Without streams it
    relays this process's stdin/stdout. ``environ`` (default ``os.environ``) is read, never
    written: ``ASSAY_STRICT_DEPRECATIONS`` and ``ASSAY_MCP_MAX_POLICY_BYTES``, and the wrapped
    server's environment when ``config.env`` is None."""
    prepared = prepare_wrap(config, warn=warn, environ=environ)
    return await run_prepared(
        prepared, client_in=client_in, client_out=client_out, warn=warn, handle_signals=handle_signals
    )


async def run_prepared(
    prepared: Prepared,
    *,
    client_in: trio.abc.ReceiveStream | None = None,
    client_out: trio.abc.SendStream | None = None,
    warn: Callable[[str], None] = _stderr,
    handle_signals: bool = True,
    early: Forked | None = None,
) -> int:
    """Start the server of a :func:`prepare_wrap`-ed run and relay until the run ends; the exit
    status. ``early``: that server, already started under its keeper for ``config.argv`` and
    its environment (:func:`assay.cli.wrap_args.start_early`); taken over here (the caller
    abandons it if this raises before)."""
    import trio

    from assay.session.records import stop_record
    from assay.shells.stdio.relay import Relay, RecordSink
    from assay.session.session import WrapSession

    config, env, target, policy = prepared.config, prepared.environ, prepared.target, prepared.policy
    source, session_id, context_bytes = prepared.source, prepared.session_id, prepared.context_bytes
    sinks = prepared.sinks
    one_run: dict[Sink, RecordSink] = {}
    restore: Callable[[], None] | None = None
    try:
        options = config.session_options(event_source=source, declared_manifest=prepared.declared)
        options.shared_session_key = None if prepared.key is None else prepared.key.key
        session = WrapSession(policy, options, clock=trio.current_time, shared=prepared.shared)
        plan = OneRunPlan(
            decision_log_new=config.decision_log_new,
            request_receipts=config.request_receipts_out,
            session_context=config.session_context_out,
            session_stop=config.session_stop_out,
        )

        def start_session() -> dict[Sink, RecordSink]:
            """Create the one-run outputs in order; the session context is written at once."""
            for sink, path in plan.items():
                fh = create_exclusive(sink.value, path)
                one_run[sink] = RecordSink(sink.value, fh)
                if sink is Sink.SESSION_CONTEXT:
                    one_run[sink].write(context_bytes)
            return {k: v for k, v in one_run.items() if k in (Sink.DECISION_LOG_NEW, Sink.RECEIPTS)}

        if client_in is None or client_out is None:
            from assay.shells.stdio.relay import open_stdio

            std_in, std_out, restore = await open_stdio()
            client_in = client_in or std_in
            client_out = client_out or std_out

        def relay_for(child: proc.ChildHandle | None) -> Relay:
            return Relay(
                config.argv,
                session,
                client_in=client_in,
                client_out=client_out,
                sinks=sinks,
                warn=warn,
                handle_signals=handle_signals,
                env=child_environment(config, env),
                on_session_start=start_session if plan.items() else None,
                child=child,
            )

        upstream_error: str | None = None
        from assay.store.store import serving

        # the shared sessions' store: swept now and every minute, closed at the end (docs/wrap.md,
        # "The state directory and its database")
        async with serving(None if prepared.shared is None else prepared.shared[0]):
            if target is None:
                if early is not None and (early.args != config.argv or early.env != child_environment(config, env)):
                    early.abandon()  # started for another command line (a library caller's): start anew
                    early = None
                try:
                    relay = relay_for(None if early is None else proc.adopt_kept(early))
                    if early is None:
                        relay.spawn()
                except proc.SpawnError as exc:
                    raise WrapError(f"cannot start {config.argv[0]}: {exc.strerror or exc}") from None
                result = await relay.run()
            else:
                from assay.wrap import remote

                result, upstream_error = await remote.run(target, config, relay_for, warn, env, client_in)
        if result.fatal:
            warn(f"fatal: {result.fatal}")
        code = result.exit_code
        if not session.is_session:
            return code  # no session: no stop record, no coverage, no state window
        if Sink.SESSION_STOP in one_run:
            try:
                counts = session.counts
                record = stop_record(
                    "upstream_error" if upstream_error else result.stop_cause,
                    child_returncode=result.child_returncode,
                    forwarded=counts["forwarded"],
                    blocked=counts["blocked"] + counts["dropped"],
                    rejected=counts["rejected"],
                    dropped_responses=session.dropped_responses,
                    wrap_signal=result.wrap_signal,
                    upstream_error=upstream_error,
                )
                one_run[Sink.SESSION_STOP].write(pretty_json(record))
            except Exception as exc:  # RelayFatal from the sink: fail closed
                warn(f"fatal: {exc}")
                code = code or 2
        return finish_reports(config, policy, session, source, session_id, code, warn)
    finally:
        for sink in (*sinks.values(), *one_run.values()):
            sink.close()
        if restore is not None:
            restore()
