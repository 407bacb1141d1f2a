"""`assay mcp wrap` start to end: checks, policy, sinks, spawn, relay.

The rules are in docs/wrap.md ("Options", "Logs", "One-run outputs and session reports",
"Lifecycle and exit status").

:func:`run_wrap` is the library entry for trio programs; the CLI builds a :class:`WrapConfig`
and prints :class:`WrapError` as ``fatal: ...`` (exit 2). Every check that can fail runs before
the child is spawned, so a refused run leaves no child and no output behind.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

import trio

from assay import proc
from assay.wrap.admission import DEFAULT_MAX_FRAME_BYTES
from assay.wrap.outputs import OneRunPlan, OutputError, check_before_spawn, create_exclusive
from assay.wrap.effects import Sink
from assay.wrap.records import stop_record
from assay.wrap.relay import Relay, RecordSink, open_stdio
from assay.wrap.reports import (
    coverage_report,
    declared_tools_of,
    new_session_id,
    pretty_json,
    session_context,
    state_window,
)
from assay.wrap.session import SessionOptions, WrapSession

DEFAULT_LABEL = "default-mcp-server"  # docs/wrap.md, "Options"
DEFAULT_SHUTDOWN_GRACE = 1.0  # seconds; docs/wrap.md, "Options"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")


class WrapError(Exception):
    """A fatal wrap error: reported as one `fatal: ...` line, exit 2.

    See docs/wrap.md, "Exit status"."""


@dataclass
class WrapConfig:
    """Everything one wrap run needs. ``argv`` is the command after ``--``, untouched."""

    argv: list[str]
    policy_path: str = "assay.yaml"
    dry_run: bool = False
    verbose: bool = False
    label: str = DEFAULT_LABEL
    event_source: str | None = None
    decision_log: str | None = None
    audit_log: str | None = None
    deny_deprecations: bool = False
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    env: dict[str, str] | None = None
    # create-new outputs: docs/wrap.md, "One-run outputs and session reports"
    decision_log_new: str | None = None
    request_receipts_out: str | None = None
    session_context_out: str | None = None
    session_stop_out: str | None = None
    coverage_out: str | None = None
    state_window_out: str | None = None
    observed_manifest_out: str | None = None
    # the declared baseline and hidden tools: docs/wrap.md, "Declared baseline", "Hiding denied tools"
    declared_manifest: str | None = None
    hide_denied_tools: bool = False

    def create_new_outputs(self) -> dict[str, str]:
        """flag -> path of every create-new output that was asked for."""
        rows = {
            "--decision-log-new": self.decision_log_new,
            "--request-receipts-out": self.request_receipts_out,
            "--session-context-out": self.session_context_out,
            "--session-stop-out": self.session_stop_out,
            "--coverage-out": self.coverage_out,
            "--state-window-out": self.state_window_out,
            "--observed-manifest-out": self.observed_manifest_out,
        }
        return {flag: path for flag, path in rows.items() if path}

    def append_outputs(self) -> dict[str, str]:
        rows = {"--decision-log": self.decision_log, "--audit-log": self.audit_log}
        return {flag: path for flag, path in rows.items() if path}


def validate_event_source(value: str | None, logging_enabled: bool) -> str | None:
    """Trimmed; required with any log sink; checked whenever given (docs/wrap.md, "Options")."""
    source = (value or "").strip() or None
    if source is None:
        if logging_enabled:
            raise WrapError("event_source is required when logging is enabled (e.g. --event-source assay://org/app)")
        return None
    scheme, sep, _rest = source.partition("://")
    if any(ch.isspace() for ch in source) or not sep or not scheme or not _SCHEME.match(scheme):
        raise WrapError(
            f"invalid --event-source {json.dumps(source, ensure_ascii=False)}: "
            "expected an absolute URI like assay://org/app"
        )
    return source


def load_policy_file(path: str, *, strict_deprecations: bool, warn: Callable[[str], None]):
    """Read and load the policy; missing means fatal, never allow-all (docs/wrap.md, "Startup")."""
    from assay.policy import PolicyError, load_policy, read_policy_file

    if not os.path.exists(path):  # a dangling symlink counts as missing
        raise WrapError(
            f"Policy file not found at {path}. Aborting instead of using insecure default (allow-all) policy."
        )
    try:
        data = read_policy_file(path)  # regular file, ASSAY_MCP_MAX_POLICY_BYTES, never blocks
    except OSError as exc:
        raise WrapError(f"cannot read policy {path}: {exc.strerror or exc}") from None
    warn(f"[assay] loading policy from {path}")
    try:
        return load_policy(data, source=path, strict_deprecations=strict_deprecations, warn=warn)
    except PolicyError as exc:
        raise WrapError(str(exc)) from None


def load_declared_manifest(path: str, label: str) -> dict:
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


def _open_append(path: str, what: str) -> RecordSink:
    """Open a log for appending. Never blocks: a FIFO without a reader is an error."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise WrapError(f"cannot open {what} {path}: it is a FIFO with no reader") from None
        raise WrapError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    try:
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "ab", buffering=0)
    except OSError as exc:
        os.close(fd)
        raise WrapError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    return RecordSink(what, fh)


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


async def run_wrap(
    config: WrapConfig,
    *,
    client_in: trio.abc.ReceiveStream | None = None,
    client_out: trio.abc.SendStream | None = None,
    warn: Callable[[str], None] = _stderr,
    handle_signals: bool = True,
) -> int:
    """Run one wrap session; returns the exit status (docs/wrap.md, "Exit status").

    Raises :class:`WrapError` on a fatal startup error (nothing spawned then). Without streams it
    relays this process's stdin/stdout."""
    if not config.argv:
        raise WrapError("no command to wrap (give it after --)")
    if config.max_frame_bytes < 1:
        raise WrapError("--max-frame-bytes must be a positive integer")
    if not (math.isfinite(config.shutdown_grace) and config.shutdown_grace >= 0):
        raise WrapError("--shutdown-grace must be a non-negative number of seconds")
    if config.deny_deprecations:
        os.environ["ASSAY_STRICT_DEPRECATIONS"] = "1"
    strict = os.environ.get("ASSAY_STRICT_DEPRECATIONS") == "1"
    policy = load_policy_file(config.policy_path, strict_deprecations=strict, warn=warn)
    declared = load_declared_manifest(config.declared_manifest, config.label) if config.declared_manifest else None
    try:  # refused before spawn: docs/wrap.md, "One-run outputs and session reports"
        check_before_spawn(config.create_new_outputs(), config.append_outputs())
    except OutputError as exc:
        raise WrapError(str(exc)) from None
    logging_enabled = bool(
        config.decision_log or config.audit_log or config.decision_log_new or config.coverage_out
        or config.state_window_out
    )
    source = validate_event_source(config.event_source, logging_enabled)
    session_id = new_session_id()
    context_bytes = b""
    if config.session_context_out:
        try:  # computed before spawn: an argument that is not valid UTF-8 cannot be digested
            context_bytes = pretty_json(session_context(config.argv, dry_run=config.dry_run))
        except ValueError as exc:
            raise WrapError(f"--session-context-out: {exc}") from None

    sinks: dict[Sink, RecordSink] = {}
    one_run: dict[Sink, RecordSink] = {}
    restore: Callable[[], None] | None = None
    try:
        if config.decision_log:
            sinks[Sink.DECISION_LOG] = _open_append(config.decision_log, "decision log")
        if config.audit_log:
            sinks[Sink.AUDIT_LOG] = _open_append(config.audit_log, "audit log")
        decision_sinks = tuple(
            sink for sink, path in ((Sink.DECISION_LOG, config.decision_log), (Sink.DECISION_LOG_NEW, config.decision_log_new))
            if path
        )
        options = SessionOptions(
            dry_run=config.dry_run,
            verbose=config.verbose,
            label=config.label,
            event_source=source,
            decision_sinks=decision_sinks,
            audit=bool(config.audit_log),
            keep_events=bool(config.coverage_out),
            receipts=bool(config.request_receipts_out),
            max_frame_bytes=config.max_frame_bytes,
            shutdown_grace=config.shutdown_grace,
            declared_manifest=declared,
            hide_denied_tools=config.hide_denied_tools,
        )
        session = WrapSession(policy, options, clock=trio.current_time)
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

        if config.dry_run:
            warn("[assay] DRY RUN MODE: No actions will be blocked.")
        warn(command_banner(config.argv))
        if client_in is None or client_out is None:
            std_in, std_out, restore = await open_stdio()
            client_in = client_in or std_in
            client_out = client_out or std_out
        relay = Relay(
            config.argv,
            session,
            client_in=client_in,
            client_out=client_out,
            sinks=sinks,
            warn=warn,
            handle_signals=handle_signals,
            env=config.env,
            on_session_start=start_session if plan.items() else None,
        )
        try:
            relay.spawn()
        except proc.SpawnError as exc:
            raise WrapError(f"cannot start {config.argv[0]}: {exc.strerror or exc}") from None
        result = await relay.run()
        if result.fatal:
            warn(f"fatal: {result.fatal}")
        code = result.exit_code
        if not session.is_session:
            return code  # no session: no stop record, no coverage, no state window
        if Sink.SESSION_STOP in one_run:
            try:
                counts = session.counts
                record = stop_record(
                    result.stop_cause,
                    child_returncode=result.child_returncode,
                    forwarded=counts["forwarded"],
                    blocked=counts["blocked"] + counts["dropped"],
                    rejected=counts["rejected"],
                    dropped_responses=session.dropped_responses,
                    wrap_signal=result.wrap_signal,
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


def finish_reports(config: WrapConfig, policy, session: WrapSession, source, session_id: str, code: int, warn) -> int:
    """Coverage, state window and observed manifest at session end, only if a session started.

    Exit precedence (docs/wrap.md, "One-run outputs and session reports"): a nonzero wrapped
    status wins, then coverage, then the state window (and observed manifest). Statuses: 3 for
    a write failure.
    """
    statuses: list[tuple[str, int]] = []
    jobs = []
    if config.coverage_out:
        declared = declared_tools_of(
            allow=policy.tools.allow, deny=policy.tools.deny, schema_keys=policy.schemas.keys(),
            pin_keys=policy.tool_pins.keys(),
        )
        jobs.append(("coverage", config.coverage_out, "coverage_report_v1",
                     lambda: coverage_report(session.coverage, declared)))
    if config.state_window_out:
        jobs.append(("state-window", config.state_window_out, "session_state_window_v1",
                     lambda: state_window(source or "", config.label, session_id)))
    if config.observed_manifest_out:
        jobs.append(("observed-manifest", config.observed_manifest_out, "assay.mcp_manifest_observed.v0",
                     lambda: observed_manifest(session, config.label)))
    for kind, path, schema, build in jobs:
        from assay.manifest.publish import publish_new  # only when a report is asked for

        try:
            publish_new(path, pretty_json(build()))
        except OSError as exc:
            warn(f"fatal: cannot write {schema} to {path}: {exc}")
            statuses.append((kind, 3))
            continue
        warn(f"Wrote {schema} to {path}")
    failed = [status for _kind, status in statuses]
    if code != 0:
        if failed:
            warn(f"Coverage/state-window generation failed after wrapped command exited with code {code}; "
                 "preserving wrapped exit code")
        return code
    return failed[0] if failed else 0


def observed_manifest(session: WrapSession, label: str) -> dict:
    """The last tools/list exchange (whole nextCursor chain) as an observed-v0 document."""
    from assay.manifest.observed import observed_document

    chain = session.last_chain
    if chain is None:
        return observed_document(label, None)
    return observed_document(label, chain.tools, complete=chain.complete)
