"""`assay mcp wrap [OPTIONS] -- <command> [args...]` (docs/wrap.md, "Options", "Command line").

This is the cyclopts command: help, and every command line the fast parser of
:mod:`assay.cli.wrap_args` leaves to it. Its parameters are checked against the one option
table, :data:`assay.wrap.options.WRAP_OPTIONS`, when the command tree is built, and its help
text is built from that table; both parsers hand the run to :func:`wrap_args.run`.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import cyclopts
from cyclopts import Parameter

from assay.cli import dash, wrap_args
from assay.cli.errors import UsageError
from assay.wrap import options

def _before_dash(command: tuple[str, ...], after: list[str]) -> None:
    """Refuse what cyclopts collected as the command beyond the words after ``--``: it came
    from before ``--``."""
    extra = list(command[: len(command) - len(after)]) if len(command) >= len(after) else list(command)
    if list(command[len(extra):]) != after:
        extra = list(command)
    if not extra:
        return
    token = extra[0]
    if token.startswith("-"):
        raise UsageError(f"unknown option before --: {token} (see assay mcp wrap --help)")
    raise UsageError(f"unexpected argument before --: {token} (the server command goes after --)")


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    def wrap_command(
        *command: Annotated[str, Parameter(allow_leading_hyphen=True)],
        policy: Annotated[str, Parameter(name="--policy")] = options.DEFAULT_POLICY,
        dry_run: Annotated[bool, Parameter(name="--dry-run", negative="")] = False,
        verbose: Annotated[bool, Parameter(name="--verbose", negative="")] = False,
        label: Annotated[str, Parameter(name="--label")] = options.DEFAULT_LABEL,
        event_source: Annotated[str | None, Parameter(name="--event-source")] = None,
        decision_log: Annotated[str | None, Parameter(name="--decision-log")] = None,
        audit_log: Annotated[str | None, Parameter(name="--audit-log")] = None,
        deny_deprecations: Annotated[bool, Parameter(name="--deny-deprecations", negative="")] = False,
        max_frame_bytes: Annotated[int, Parameter(name="--max-frame-bytes")] = options.DEFAULT_MAX_FRAME_BYTES,
        shutdown_grace: Annotated[float, Parameter(name="--shutdown-grace")] = options.DEFAULT_SHUTDOWN_GRACE,
        decision_log_new: Annotated[str | None, Parameter(name="--decision-log-new")] = None,
        request_receipts_out: Annotated[str | None, Parameter(name="--request-receipts-out")] = None,
        session_context_out: Annotated[str | None, Parameter(name="--session-context-out")] = None,
        session_stop_out: Annotated[str | None, Parameter(name="--session-stop-out")] = None,
        coverage_out: Annotated[str | None, Parameter(name="--coverage-out")] = None,
        state_window_out: Annotated[str | None, Parameter(name="--state-window-out")] = None,
        observed_manifest_out: Annotated[str | None, Parameter(name="--observed-manifest-out")] = None,
        declared_manifest: Annotated[str | None, Parameter(name="--declared-manifest")] = None,
        hide_denied_tools: Annotated[bool, Parameter(name="--hide-denied-tools", negative="")] = False,
        shared_session: Annotated[str | None, Parameter(name="--shared-session")] = None,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
        session_lock_timeout: Annotated[float, Parameter(name="--session-lock-timeout")] = (
            options.DEFAULT_SESSION_LOCK_TIMEOUT
        ),
        log_arguments: Annotated[bool, Parameter(name="--log-arguments", negative="")] = False,
        log_arguments_max: Annotated[int, Parameter(name="--log-arguments-max")] = options.DEFAULT_LOG_ARGUMENTS_MAX,
        log_max_bytes: Annotated[int, Parameter(name="--log-max-bytes")] = options.DEFAULT_LOG_MAX_BYTES,
        url: Annotated[str | None, Parameter(name="--url")] = None,
        transport: Annotated[str, Parameter(name="--transport")] = options.DEFAULT_TRANSPORT,
        header: Annotated[tuple[str, ...], Parameter(name="--header", consume_multiple=False, negative="")] = (),
        header_env: Annotated[tuple[str, ...], Parameter(name="--header-env", consume_multiple=False, negative="")] = (),
        ca_file: Annotated[str | None, Parameter(name="--ca-file")] = None,
        allow_insecure_http: Annotated[bool, Parameter(name="--allow-insecure-http", negative="")] = False,
        bearer_env: Annotated[str | None, Parameter(name="--bearer-env")] = None,
        header_env_if_set: Annotated[tuple[str, ...], Parameter(name="--header-env-if-set", consume_multiple=False,
                                                                negative="")] = (),
        login: Annotated[str, Parameter(name="--login")] = options.DEFAULT_LOGIN,
        connect_timeout: Annotated[float, Parameter(name="--connect-timeout")] = options.DEFAULT_CONNECT_TIMEOUT,
    ) -> int:
        given = locals()
        values = {opt.param: given[opt.param] for opt in options.WRAP_OPTIONS}
        after = dash.AFTER or []
        _before_dash(command, after)
        return wrap_args.run(values, after)

    check_against_table(wrap_command)
    wrap_command.__doc__ = help_text()
    mcp.command(wrap_command, name="wrap", usage=USAGE)


USAGE = "Usage: assay mcp wrap [OPTIONS] -- <command> [args...]\n       assay mcp wrap [OPTIONS] --url URL"
SUMMARY = "Wrap an MCP server (a command over stdio, or a remote one) and enforce a policy on its tool calls."
EXIT_CODES = (
    "Exit codes: the server's exit code; 128+N when wrap got signal N or the server died of it; "
    "2 usage and fatal errors; 3 a session report could not be written."
)
COMMAND_HELP = "The MCP server command and its arguments, after a literal --."


def help_text() -> str:
    """The command's docstring (what `assay mcp wrap --help` shows): each option's help from
    the table, in its order."""
    lines = [SUMMARY, "", EXIT_CODES, "", "Parameters", "----------", "command", f"    {COMMAND_HELP}"]
    for opt in options.WRAP_OPTIONS:
        lines += [opt.param, f"    {opt.help}"]
    return "\n".join(lines) + "\n"


def check_against_table(command: Any) -> None:
    """The cyclopts command's options are exactly options.WRAP_OPTIONS: same order, flag,
    parameter name, kind and default. A mismatch is a programming error, caught when the command
    tree is built (every `assay` run that reaches cyclopts, and tests/test_wrap_args.py)."""
    hints = get_type_hints(command, include_extras=True)
    params = [p for p in inspect.signature(command).parameters.values() if p.kind is p.KEYWORD_ONLY]
    found = []
    for p in params:
        base, *meta = get_args(hints[p.name])
        names = [list(m.name or ()) for m in meta if isinstance(m, Parameter)]
        kinds = [tuple] if get_origin(base) is tuple else [k for k in (get_args(base) or (base,)) if k is not type(None)]
        found.append((names[0][0] if names and names[0] else None, p.name, kinds, p.default))
    want = [(opt.flag, opt.param, [opt.kind], opt.default) for opt in options.WRAP_OPTIONS]
    if found != want:
        raise RuntimeError(f"assay mcp wrap: the cyclopts command and options.WRAP_OPTIONS disagree: {found} != {want}")
