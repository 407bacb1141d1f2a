"""`assay mcp wrap` start to end: checks, policy, sinks, spawn, relay (wrap.md §1.3, D14a).

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
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from assay import proc
from assay.wrap.admission import DEFAULT_MAX_FRAME_BYTES
from assay.wrap.relay import Relay, RecordSink, open_stdio
from assay.wrap.session import AUDIT_SINK, SessionOptions, WrapSession

DEFAULT_LABEL = "default-mcp-server"  # D17
DEFAULT_SHUTDOWN_GRACE = 1.0  # D14
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")


class WrapError(Exception):
    """A fatal wrap error: reported as one `fatal: ...` line, exit 2 (wrap.md §1.4.3, D2)."""


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
    extra: dict = field(default_factory=dict)


def validate_event_source(value: str | None, logging_enabled: bool) -> str | None:
    """wrap.md §1.3 step 7: trimmed; required with any log sink; always validated when given."""
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
    """Read and load the policy; missing means fatal, never allow-all (wrap.md §1.3 step 4)."""
    from assay.policy import PolicyError, load_policy

    if not os.path.exists(path):  # a dangling symlink counts as missing
        raise WrapError(
            f"Policy file not found at {path}. Aborting instead of using insecure default (allow-all) policy."
        )
    warn(f"[assay] loading policy from {path}")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise WrapError(f"cannot read policy {path}: {exc.strerror or exc}") from None
    try:
        return load_policy(data, source=path, strict_deprecations=strict_deprecations, warn=warn)
    except PolicyError as exc:
        raise WrapError(str(exc)) from None


def _open_append(path: str, what: str) -> RecordSink:
    try:
        fh = open(path, "ab", buffering=0)
    except OSError as exc:
        raise WrapError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    return RecordSink(what, fh)


def _stderr(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def command_banner(argv: list[str]) -> str:
    """`[assay] wrapping command: <command> ["arg", ...]` (wrap.md §1.3 step 10)."""
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
    """Run one wrap session; returns the exit status (D14). Raises :class:`WrapError` on a fatal
    startup error (nothing spawned then). Without streams it relays this process's stdin/stdout."""
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
    logging_enabled = bool(config.decision_log or config.audit_log)
    source = validate_event_source(config.event_source, logging_enabled)

    sinks: dict[str, RecordSink] = {}
    restore: Callable[[], None] | None = None
    try:
        if config.decision_log:
            sinks["decision_log"] = _open_append(config.decision_log, "decision log")
        if config.audit_log:
            sinks[AUDIT_SINK] = _open_append(config.audit_log, "audit log")
        options = SessionOptions(
            dry_run=config.dry_run,
            verbose=config.verbose,
            label=config.label,
            event_source=source,
            decision_sinks=("decision_log",) if config.decision_log else (),
            audit=bool(config.audit_log),
        )
        session = WrapSession(policy, options)
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
            max_frame_bytes=config.max_frame_bytes,
            shutdown_grace=config.shutdown_grace,
            handle_signals=handle_signals,
            env=config.env,
        )
        try:
            relay.spawn()
        except proc.SpawnError as exc:
            raise WrapError(f"cannot start {config.argv[0]}: {exc.strerror or exc}") from None
        result = await relay.run()
        if result.fatal:
            warn(f"fatal: {result.fatal}")
        return result.exit_code
    finally:
        for sink in sinks.values():
            sink.close()
        if restore is not None:
            restore()
