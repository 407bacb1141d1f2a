"""`assay mcp wrap`'s options: each declared once (docs/wrap.md, "Options").

:class:`WrapOptions` is the declaration: one dataclass field per option, its type and default
the field's, its flag, help line, environment variable and output kind in the
:class:`Option` of its ``Annotated`` type. Everything else is derived from it:

- :data:`WRAP_OPTIONS` (with :data:`BY_FLAG`, :data:`BY_FIELD`), the table read by the rest;
- :class:`assay.wrap.run.WrapConfig`, the config of a run: these fields plus the command and
  the server's environment (a subclass, so attribute access stays typed);
- the cyclopts command (:mod:`assay.cli.wrap`): its parameters and help text are built from
  the table;
- the fast parser of plain command lines (:func:`assay.cli.wrap_args.parse_fast`) and the one
  walk over a wrap line's options (:func:`assay.wrap.optionline.read_option_tokens`), which
  protect's reader of wrap lines (:mod:`assay.clients.wrapped`) uses too;
- `assay mcp protect` and `assay mcp config-path` write wrap lines with the table's flags and
  :func:`assay.wrap.optionline.option_tokens`.

So a new option is one field here (tests/test_wrap_args.py shows it reaching all of them).

A leaf module: nothing but the standard library, no trio; it is on the start-up path of every
wrap run (so its annotations are not strings: reading them costs nothing at import).
"""

import dataclasses
from typing import Annotated, Any, NamedTuple, get_args, get_type_hints

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_LABEL",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_SHUTDOWN_GRACE",
    "STRICT_DEPRECATIONS_ENV",
    "SHARED_SESSION_ENV",
    "STATE_DIR_ENV",
    "DEFAULT_SHARED_SESSION",
    "DEFAULT_SESSION_LOCK_TIMEOUT",
    "DEFAULT_LOG_ARGUMENTS_MAX",
    "DEFAULT_LOG_MAX_BYTES",
    "DEFAULT_TRANSPORT",
    "DEFAULT_CONNECT_TIMEOUT",
    "TRANSPORTS",
    "DEFAULT_LOGIN",
    "LOGIN_MODES",
    "URL_FLAG",
    "APPEND",
    "CREATE_NEW",
    "Option",
    "WrapOptions",
    "WrapOption",
    "table_of",
    "WRAP_OPTIONS",
    "BY_FLAG",
    "BY_FIELD",
    "defaults",
]

DEFAULT_POLICY = "assay.yaml"
DEFAULT_LABEL = "default-mcp-server"
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024  # the same as assay.session.admission's (a test checks)
DEFAULT_SHUTDOWN_GRACE = 1.0  # seconds
STRICT_DEPRECATIONS_ENV = "ASSAY_STRICT_DEPRECATIONS"  # docs/wrap.md, "Options" (--deny-deprecations)
SHARED_SESSION_ENV = "ASSAY_SHARED_SESSION"  # docs/wrap.md, "Shared sessions"
STATE_DIR_ENV = "ASSAY_STATE_DIR"
DEFAULT_SHARED_SESSION = "client"
DEFAULT_SESSION_LOCK_TIMEOUT = 2.0  # seconds
DEFAULT_LOG_ARGUMENTS_MAX = 4096  # bytes (docs/wrap-records.md, "Logged arguments")
DEFAULT_LOG_MAX_BYTES = 16 * 1024 * 1024  # a log's size before it is rotated (docs/wrap.md, "Log rotation")
DEFAULT_TRANSPORT = "auto"  # docs/remote.md, "Transports"
DEFAULT_CONNECT_TIMEOUT = 15.0  # seconds (docs/remote.md, "Start")
TRANSPORTS = ("auto", "streamable-http", "sse")
DEFAULT_LOGIN = "auto"  # docs/auth.md, "Logging in from wrap"
LOGIN_MODES = ("auto", "never")
URL_FLAG = "--url"  # a line with it has no `--` (docs/wrap.md, "Command line")

APPEND = "append"  # an append log: docs/wrap.md, "Logs"
CREATE_NEW = "create-new"  # a one-run output: docs/wrap.md, "One-run outputs and session reports"


@dataclasses.dataclass(frozen=True)
class Option:
    """What a :class:`WrapOptions` field says of its option, next to its type and default:
    ``flag`` (``--policy``; the cyclopts parameter is its name with ``_`` for ``-``), ``help``
    (its line in `assay mcp wrap --help`), ``env`` (the environment variable it sets or stands
    for, if any), ``output`` (:data:`APPEND` or :data:`CREATE_NEW` for an option naming an
    output file).

    A field's type is one of ``str``, ``str | None`` (default None), ``bool`` (a flag without a
    value, default False), ``int``, ``float``, or ``tuple[str, ...]`` (a str option given any
    number of times, in order, default ``()``)."""

    flag: str
    help: str
    env: str | None = None
    output: str | None = None


@dataclasses.dataclass(kw_only=True, repr=False, eq=False)  # (WrapConfig has them: less to build at start-up)
class WrapOptions:
    """THE declaration of wrap's options, one field each, in the order `--help` lists them (see
    the module docstring). :class:`assay.wrap.run.WrapConfig` adds the command and environment."""

    policy_path: Annotated[
        str,
        Option(
            "--policy",
            "MCP policy file (YAML). Missing or invalid is fatal: never allow-all.",
        ),
    ] = DEFAULT_POLICY
    dry_run: Annotated[
        bool,
        Option(
            "--dry-run",
            "Evaluate and log every decision, but block nothing.",
        ),
    ] = False
    verbose: Annotated[
        bool,
        Option(
            "--verbose",
            "Print one line per decision (and per newly seen tool) to stderr.",
        ),
    ] = False
    label: Annotated[
        str,
        Option(
            "--label",
            "Server id used in tool identities and pins.",
        ),
    ] = DEFAULT_LABEL
    event_source: Annotated[
        str | None,
        Option(
            "--event-source",
            "CloudEvents source URI (scheme://...); default assay://local/<label> with a log option.",
        ),
    ] = None
    decision_log: Annotated[
        str | None,
        Option(
            "--decision-log",
            "Append assay.tool.decision events (NDJSON) to this file.",
            output=APPEND,
        ),
    ] = None
    audit_log: Annotated[
        str | None,
        Option(
            "--audit-log",
            "Append audit records (NDJSON) to this file.",
            output=APPEND,
        ),
    ] = None
    deny_deprecations: Annotated[
        bool,
        Option(
            "--deny-deprecations",
            "Refuse deprecated (v1) policy formats.",
            env=STRICT_DEPRECATIONS_ENV,
        ),
    ] = False
    max_frame_bytes: Annotated[
        int,
        Option(
            "--max-frame-bytes",
            "Largest client frame in bytes; longer ones are rejected (frame_too_large).",
        ),
    ] = DEFAULT_MAX_FRAME_BYTES
    shutdown_grace: Annotated[
        float,
        Option(
            "--shutdown-grace",
            "Seconds the server gets after client EOF before it is terminated.",
        ),
    ] = DEFAULT_SHUTDOWN_GRACE
    # create-new outputs: docs/wrap.md, "One-run outputs and session reports"
    decision_log_new: Annotated[
        str | None,
        Option(
            "--decision-log-new",
            "This session's decision events in a new file (create-new, one run).",
            output=CREATE_NEW,
        ),
    ] = None
    request_receipts_out: Annotated[
        str | None,
        Option(
            "--request-receipts-out",
            "One receipt per client frame of the session (create-new, one run).",
            output=CREATE_NEW,
        ),
    ] = None
    session_context_out: Annotated[
        str | None,
        Option(
            "--session-context-out",
            "Mode and command digest of the session (create-new, one run).",
            output=CREATE_NEW,
        ),
    ] = None
    session_stop_out: Annotated[
        str | None,
        Option(
            "--session-stop-out",
            "How the session ended (create-new, one run).",
            output=CREATE_NEW,
        ),
    ] = None
    coverage_out: Annotated[
        str | None,
        Option(
            "--coverage-out",
            "coverage_report_v1 of this session, written at its end (create-new).",
            output=CREATE_NEW,
        ),
    ] = None
    state_window_out: Annotated[
        str | None,
        Option(
            "--state-window-out",
            "session_state_window_v1, written at session end (create-new).",
            output=CREATE_NEW,
        ),
    ] = None
    observed_manifest_out: Annotated[
        str | None,
        Option(
            "--observed-manifest-out",
            "The last tools/list result as assay.mcp_manifest_observed.v0 (create-new).",
            output=CREATE_NEW,
        ),
    ] = None
    # the declared baseline and hidden tools: docs/wrap.md, "Declared baseline", "Hiding denied tools"
    declared_manifest: Annotated[
        str | None,
        Option(
            "--declared-manifest",
            "Approved tools (assay mcp manifest promote): deny undeclared or changed tools.",
        ),
    ] = None
    hide_denied_tools: Annotated[
        bool,
        Option(
            "--hide-denied-tools",
            "Leave tools the policy denies by name or class out of tools/list answers.",
        ),
    ] = False
    # one agent session across the client's wraps: docs/wrap.md, "Shared sessions"
    shared_session: Annotated[
        str | None,
        Option(
            "--shared-session",
            "Agent session shared with the client's other wraps: client (default), a name, or none.",
            env=SHARED_SESSION_ENV,
        ),
    ] = None
    state_dir: Annotated[
        str | None,
        Option(
            "--state-dir",
            "Directory of assay's state (the shared sessions' database); default $XDG_STATE_HOME/assay.",
            env=STATE_DIR_ENV,
        ),
    ] = None
    session_lock_timeout: Annotated[
        float,
        Option(
            "--session-lock-timeout",
            "Seconds a call waits for the shared session's database before it is denied.",
        ),
    ] = DEFAULT_SESSION_LOCK_TIMEOUT
    # arguments in the records: docs/wrap-records.md, "Logged arguments"
    log_arguments: Annotated[
        bool,
        Option(
            "--log-arguments",
            "Put each call's arguments, secrets redacted, in its decision event and audit record.",
        ),
    ] = False
    log_arguments_max: Annotated[
        int,
        Option(
            "--log-arguments-max",
            "Largest logged arguments in bytes of JSON; longer ones are cut (with --log-arguments).",
        ),
    ] = DEFAULT_LOG_ARGUMENTS_MAX
    # log rotation: docs/wrap.md, "Log rotation"
    log_max_bytes: Annotated[
        int,
        Option(
            "--log-max-bytes",
            "Rotate --decision-log and --audit-log files at this size in bytes (0: never; default 16 MiB).",
        ),
    ] = DEFAULT_LOG_MAX_BYTES
    # a remote server instead of a command: docs/remote.md
    url: Annotated[
        str | None,
        Option(
            URL_FLAG,
            "Relay to this remote MCP server (https://...) instead of a command after --.",
        ),
    ] = None
    transport: Annotated[
        str,
        Option(
            "--transport",
            "With --url: auto (Streamable HTTP, else legacy SSE), streamable-http or sse.",
        ),
    ] = DEFAULT_TRANSPORT
    header: Annotated[
        tuple[str, ...],
        Option(
            "--header",
            "With --url: 'Name: value' sent with every request (repeatable; ${VAR} from the environment).",
        ),
    ] = ()
    header_env: Annotated[
        tuple[str, ...],
        Option(
            "--header-env",
            "With --url: 'Name=VAR' sends header Name with the value of environment variable VAR (repeatable).",
        ),
    ] = ()
    ca_file: Annotated[
        str | None,
        Option(
            "--ca-file",
            "With --url: PEM file of the certificate authorities to trust (default: the system's).",
        ),
    ] = None
    allow_insecure_http: Annotated[
        bool,
        Option(
            "--allow-insecure-http",
            "With --url: allow plain http:// to a host that is not loopback.",
        ),
    ] = False
    # Codex's bearer_token_env_var and env_http_headers, as protect carries them (docs/remote.md)
    bearer_env: Annotated[
        str | None,
        Option(
            "--bearer-env",
            "With --url: send 'Authorization: Bearer <value of environment variable VAR>' (VAR unset or empty is fatal).",
        ),
    ] = None
    header_env_if_set: Annotated[
        tuple[str, ...],
        Option(
            "--header-env-if-set",
            "With --url: 'Name=VAR' as --header-env, but a VAR unset or blank sends no header (repeatable).",
        ),
    ] = ()
    login: Annotated[
        str,
        Option(
            "--login",
            "With --url: auto (log in through the browser when the server asks and one can be opened) or never.",
        ),
    ] = DEFAULT_LOGIN
    connect_timeout: Annotated[
        float,
        Option(
            "--connect-timeout",
            "With --url: seconds to connect to the server, and at start for its first answer.",
        ),
    ] = DEFAULT_CONNECT_TIMEOUT


class WrapOption(NamedTuple):
    """One option as the table gives it, derived from its :class:`WrapOptions` field."""

    flag: str  # "--policy"
    param: str  # the cyclopts command's parameter name ("policy")
    field: str  # the WrapOptions field it fills ("policy_path")
    kind: type  # str, bool, int, float or tuple (see Option)
    default: object
    help: str
    env: str | None = None
    output: str | None = None
    hint: Any = None  # the field's type (``str | None``), what the cyclopts parameter is annotated with


_KINDS = (str, bool, int, float)


def _kind(name: str, hint: Any, default: object) -> type:
    """The kind of a field's option (see :class:`Option`); a type or default wrap cannot read on
    a command line is a programming error (TypeError, when the table is built)."""
    if hint in _KINDS and isinstance(default, hint) and (hint is not bool or default is False):
        return hint  # type: ignore[no-any-return]
    args = get_args(hint)
    if args == (str, type(None)) and default is None:
        return str
    if args == (str, ...) and default == ():
        return tuple
    raise TypeError(f"wrap option field {name}: {hint!r} = {default!r} is not an option wrap can read")


def table_of(cls: type) -> tuple[WrapOption, ...]:
    """The option table of ``cls`` (:class:`WrapOptions` or a subclass): a row for each field
    annotated with an :class:`Option`, in field order."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        hints.update(klass.__dict__.get("__annotations__", {}))
    if any(
        isinstance(hint, str) for hint in hints.values()
    ):  # a declaration under `from __future__ import annotations`
        hints = get_type_hints(cls, include_extras=True)
    rows: list[WrapOption] = []
    for f in dataclasses.fields(cls):
        meta = [m for m in getattr(hints[f.name], "__metadata__", ()) if isinstance(m, Option)]
        if not meta:
            continue
        (opt,) = meta
        hint = get_args(hints[f.name])[0]
        if not opt.flag.startswith("--"):
            raise TypeError(f"wrap option field {f.name}: its flag {opt.flag!r} does not start with --")
        rows.append(
            WrapOption(
                opt.flag,
                opt.flag[2:].replace("-", "_"),
                f.name,
                _kind(f.name, hint, f.default),
                f.default,
                opt.help,
                opt.env,
                opt.output,
                hint,
            )
        )
    return tuple(rows)


WRAP_OPTIONS: tuple[WrapOption, ...] = table_of(WrapOptions)
BY_FLAG: dict[str, WrapOption] = {opt.flag: opt for opt in WRAP_OPTIONS}
BY_FIELD: dict[str, WrapOption] = {opt.field: opt for opt in WRAP_OPTIONS}


def defaults() -> dict[str, object]:
    """param -> default of every option."""
    return {opt.param: opt.default for opt in WRAP_OPTIONS}
