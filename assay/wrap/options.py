"""`assay mcp wrap`'s options: the one table (docs/wrap.md, "Options").

Every reader of wrap's options reads :data:`WRAP_OPTIONS`:

- the fast parser of plain command lines (:func:`assay.cli.wrap_args.parse_fast`) takes its
  flags, kinds and defaults from it;
- the cyclopts command (:mod:`assay.cli.wrap`) is checked against it when the command tree is
  built (flags, parameter names, kinds, defaults), and its help text comes from it;
- :class:`assay.wrap.run.WrapConfig` is checked against it when :mod:`assay.wrap.run` is
  imported (:func:`check_config_fields`): one field per option, same name, type and default;
- `assay mcp protect` and `assay mcp config-path` write wrap lines with its flags and
  :func:`option_tokens`, and protect reads them back with :data:`BY_FLAG`.

So an option added in one place only fails at once (tests/test_wrap_args.py shows it).

A leaf module: nothing but the standard library, no trio; it is on the start-up path of every
wrap run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

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
    "WrapOption",
    "WRAP_OPTIONS",
    "BY_FLAG",
    "BY_FIELD",
    "flag_of",
    "read_option_tokens",
    "plain_int",
    "plain_float",
    "option_tokens",
    "defaults",
    "check_config_fields",
]

DEFAULT_POLICY = "assay.yaml"
DEFAULT_LABEL = "default-mcp-server"
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024  # the same as assay.wrap.admission's (a test checks)
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


class WrapOption(NamedTuple):
    flag: str  # "--policy"
    param: str  # the cyclopts command's parameter name
    field: str  # the WrapConfig field it fills
    kind: type  # str, bool (a flag without a value), int, float, or tuple (a str option given
    # any number of times, in order; default ()); str options may default to None
    default: object
    help: str  # the option's line in `assay mcp wrap --help`
    env: str | None = None  # the environment variable the option sets or stands for, if any
    output: str | None = None  # APPEND or CREATE_NEW for an option naming an output file


WRAP_OPTIONS: tuple[WrapOption, ...] = (
    WrapOption("--policy", "policy", "policy_path", str, DEFAULT_POLICY,
               "MCP policy file (YAML). Missing or invalid is fatal: never allow-all."),
    WrapOption("--dry-run", "dry_run", "dry_run", bool, False,
               "Evaluate and log every decision, but block nothing."),
    WrapOption("--verbose", "verbose", "verbose", bool, False,
               "Print one line per decision (and per newly seen tool) to stderr."),
    WrapOption("--label", "label", "label", str, DEFAULT_LABEL,
               "Server id used in tool identities and pins."),
    WrapOption("--event-source", "event_source", "event_source", str, None,
               "CloudEvents source URI (scheme://...); default assay://local/<label> with a log option."),
    WrapOption("--decision-log", "decision_log", "decision_log", str, None,
               "Append assay.tool.decision events (NDJSON) to this file.", output=APPEND),
    WrapOption("--audit-log", "audit_log", "audit_log", str, None,
               "Append audit records (NDJSON) to this file.", output=APPEND),
    WrapOption("--deny-deprecations", "deny_deprecations", "deny_deprecations", bool, False,
               "Refuse deprecated (v1) policy formats.", env=STRICT_DEPRECATIONS_ENV),
    WrapOption("--max-frame-bytes", "max_frame_bytes", "max_frame_bytes", int, DEFAULT_MAX_FRAME_BYTES,
               "Largest client frame in bytes; longer ones are rejected (frame_too_large)."),
    WrapOption("--shutdown-grace", "shutdown_grace", "shutdown_grace", float, DEFAULT_SHUTDOWN_GRACE,
               "Seconds the server gets after client EOF before it is terminated."),
    WrapOption("--decision-log-new", "decision_log_new", "decision_log_new", str, None,
               "This session's decision events in a new file (create-new, one run).", output=CREATE_NEW),
    WrapOption("--request-receipts-out", "request_receipts_out", "request_receipts_out", str, None,
               "One receipt per client frame of the session (create-new, one run).", output=CREATE_NEW),
    WrapOption("--session-context-out", "session_context_out", "session_context_out", str, None,
               "Mode and command digest of the session (create-new, one run).", output=CREATE_NEW),
    WrapOption("--session-stop-out", "session_stop_out", "session_stop_out", str, None,
               "How the session ended (create-new, one run).", output=CREATE_NEW),
    WrapOption("--coverage-out", "coverage_out", "coverage_out", str, None,
               "coverage_report_v1 of this session, written at its end (create-new).", output=CREATE_NEW),
    WrapOption("--state-window-out", "state_window_out", "state_window_out", str, None,
               "session_state_window_v1, written at session end (create-new).", output=CREATE_NEW),
    WrapOption("--observed-manifest-out", "observed_manifest_out", "observed_manifest_out", str, None,
               "The last tools/list result as assay.mcp_manifest_observed.v0 (create-new).", output=CREATE_NEW),
    WrapOption("--declared-manifest", "declared_manifest", "declared_manifest", str, None,
               "Approved tools (assay mcp manifest promote): deny undeclared or changed tools."),
    WrapOption("--hide-denied-tools", "hide_denied_tools", "hide_denied_tools", bool, False,
               "Leave tools the policy denies by name or class out of tools/list answers."),
    WrapOption("--shared-session", "shared_session", "shared_session", str, None,
               "Agent session shared with the client's other wraps: client (default), a name, or none.",
               env=SHARED_SESSION_ENV),
    WrapOption("--state-dir", "state_dir", "state_dir", str, None,
               "Directory of assay's state (the shared sessions' database); default $XDG_STATE_HOME/assay.",
               env=STATE_DIR_ENV),
    WrapOption("--session-lock-timeout", "session_lock_timeout", "session_lock_timeout", float,
               DEFAULT_SESSION_LOCK_TIMEOUT,
               "Seconds a call waits for the shared session's database before it is denied."),
    WrapOption("--log-arguments", "log_arguments", "log_arguments", bool, False,
               "Put each call's arguments, secrets redacted, in its decision event and audit record."),
    WrapOption("--log-arguments-max", "log_arguments_max", "log_arguments_max", int, DEFAULT_LOG_ARGUMENTS_MAX,
               "Largest logged arguments in bytes of JSON; longer ones are cut (with --log-arguments)."),
    WrapOption("--log-max-bytes", "log_max_bytes", "log_max_bytes", int, DEFAULT_LOG_MAX_BYTES,
               "Rotate --decision-log and --audit-log files at this size in bytes (0: never; default 16 MiB)."),
    # a remote server instead of a command: docs/remote.md
    WrapOption(URL_FLAG, "url", "url", str, None,
               "Relay to this remote MCP server (https://...) instead of a command after --."),
    WrapOption("--transport", "transport", "transport", str, DEFAULT_TRANSPORT,
               "With --url: auto (Streamable HTTP, else legacy SSE), streamable-http or sse."),
    WrapOption("--header", "header", "header", tuple, (),
               "With --url: 'Name: value' sent with every request (repeatable; ${VAR} from the environment)."),
    WrapOption("--header-env", "header_env", "header_env", tuple, (),
               "With --url: 'Name=VAR' sends header Name with the value of environment variable VAR (repeatable)."),
    WrapOption("--ca-file", "ca_file", "ca_file", str, None,
               "With --url: PEM file of the certificate authorities to trust (default: the system's)."),
    WrapOption("--allow-insecure-http", "allow_insecure_http", "allow_insecure_http", bool, False,
               "With --url: allow plain http:// to a host that is not loopback."),
    # Codex's bearer_token_env_var and env_http_headers, as protect carries them (docs/remote.md)
    WrapOption("--bearer-env", "bearer_env", "bearer_env", str, None,
               "With --url: send 'Authorization: Bearer <value of environment variable VAR>' (VAR unset or empty is fatal)."),
    WrapOption("--header-env-if-set", "header_env_if_set", "header_env_if_set", tuple, (),
               "With --url: 'Name=VAR' as --header-env, but a VAR unset or blank sends no header (repeatable)."),
    WrapOption("--login", "login", "login", str, DEFAULT_LOGIN,
               "With --url: auto (log in through the browser when the server asks and one can be opened) or never."),
    WrapOption("--connect-timeout", "connect_timeout", "connect_timeout", float, DEFAULT_CONNECT_TIMEOUT,
               "With --url: seconds to connect to the server, and at start for its first answer."),
)
BY_FLAG: dict[str, WrapOption] = {opt.flag: opt for opt in WRAP_OPTIONS}
BY_FIELD: dict[str, WrapOption] = {opt.field: opt for opt in WRAP_OPTIONS}

# WrapConfig fields that are not options: the command after `--`, and the server's environment
# (library callers only).
CONFIG_ONLY_FIELDS = {"argv": "list[str]", "env": "dict[str, str] | None"}


_DIGITS = frozenset("0123456789")


def plain_int(text: str) -> int | None:
    """A number option's value as wrap reads it on a plain command line: ASCII digits only, no
    sign, no underscores, no leading zero (int() and cyclopts agree on those), else None."""
    if not text or not _DIGITS.issuperset(text) or (len(text) > 1 and text[0] == "0") or len(text) > 18:
        return None
    return int(text)


def plain_float(text: str) -> float | None:
    """A seconds option's value as wrap reads it on a plain command line (``2``, ``0.5``), else None."""
    whole, dot, frac = text.partition(".")
    if plain_int(whole) is None or (dot and (not frac or not _DIGITS.issuperset(frac) or len(frac) > 9)):
        return None
    return float(text)


def read_option_tokens(
    tokens: Sequence[str], *, any_next: bool = False
) -> tuple[list[tuple[WrapOption, str | None]], list[str]] | None:
    """The one walk over a wrap line's options (docs/wrap.md, "Command line"): ``tokens`` after
    ``mcp wrap`` -> ((option, its value text, or None for a flag) in order, the tokens after the
    ``--`` that ends them), or None for an unknown or repeated option (a repeatable one, kind
    ``tuple``, may come any number of times), a flag given a value (``--dry-run=x``), a missing
    value, or no ``--`` (a line with ``--url`` ends without one: its command is ``[]``). A value is the text after ``=`` or the next
    token, which must not start with ``-`` unless ``any_next`` (the lines an older protect wrote,
    read by ``--undo``). What a value may be is the caller's: wrap's fast parser and the
    wrapped-line reader each check it their way."""
    given: list[tuple[WrapOption, str | None]] = []
    seen: set[str] = set()
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        if token == "--":
            return given, list(tokens[i + 1:])
        flag, eq, inline = token.partition("=")
        opt = BY_FLAG.get(flag)
        if opt is None or (flag in seen and opt.kind is not tuple):
            return None
        seen.add(flag)
        i += 1
        if opt.kind is bool:
            if eq:
                return None
            given.append((opt, None))
        elif eq:
            given.append((opt, inline))
        elif i < n and (any_next or not tokens[i].startswith("-")):
            given.append((opt, tokens[i]))
            i += 1
        else:
            return None  # a missing value ("--label -x" and "--label --" are read as one too)
    return (given, []) if URL_FLAG in seen else None  # no "--"


def flag_of(field: str) -> str:
    """The flag of the option that fills WrapConfig ``field`` (KeyError for no such option)."""
    return BY_FIELD[field].flag


def option_tokens(flag: str, value: str) -> list[str]:
    """The tokens that give a value option ``value`` in a command line assay writes (protect,
    config-path). A value that starts with ``-`` (a server named ``--`` or ``-x``, a path like
    ``-p.yaml``) would be read as an option of its own; joined to its flag it is only a value."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def defaults() -> dict[str, object]:
    """param -> default of every option."""
    return {opt.param: opt.default for opt in WRAP_OPTIONS}


def type_text(opt: WrapOption) -> str:
    """The annotation of ``opt``'s WrapConfig field, as written there (``str | None``)."""
    if opt.kind is tuple:
        return "tuple[str, ...]"
    return opt.kind.__name__ + (" | None" if opt.default is None else "")


def check_config_fields(fields: Iterable[tuple[str, object, object]], options: Iterable[WrapOption] = WRAP_OPTIONS) -> None:
    """``fields`` (name, annotation, default of each WrapConfig field, in order) are the table's:
    one per option, in table order, with the option's type and default, plus
    :data:`CONFIG_ONLY_FIELDS`. A mismatch is a programming error (RuntimeError), raised when
    :mod:`assay.wrap.run` is imported."""
    rows = [(name, str(annotation), default) for name, annotation, default in fields]
    found = [row for row in rows if row[0] not in CONFIG_ONLY_FIELDS]
    want = [(opt.field, type_text(opt), opt.default) for opt in options]
    others = {name: annotation for name, annotation, _ in rows if name in CONFIG_ONLY_FIELDS}
    if found != want or others != CONFIG_ONLY_FIELDS:
        raise RuntimeError(f"WrapConfig and assay.wrap.options.WRAP_OPTIONS disagree: {found} != {want}")
