"""`assay mcp wrap`'s options in one table, and the fast parser the start-up path uses.

:data:`WRAP_OPTIONS` is the one list of wrap's options: flag, parameter name of the cyclopts
command in :mod:`assay.cli.wrap`, the :class:`~assay.wrap.run.WrapConfig` field, value kind and
default. :mod:`assay.cli.wrap` checks its cyclopts command against this table when the command
tree is built, so the two cannot disagree.

:func:`parse_fast` reads the plain, well-formed command lines (every token before ``--`` a known
option given once, with a plain value) without importing cyclopts, which costs ~100 ms of
start-up. Anything else (``--help``, an unknown or repeated option, a missing value, a value that
starts with ``-``, a number cyclopts might read differently, nothing after ``--``) returns
``None`` and the caller falls back to the cyclopts command, so every help text and usage error
is cyclopts' own. tests/test_wrap_args.py checks the two agree over generated command lines.

No heavy imports here: this module is on the start-up path of every wrap run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from assay.wrap.run import WrapConfig

DEFAULT_POLICY = "assay.yaml"
DEFAULT_LABEL = "default-mcp-server"  # docs/wrap.md, "Options" (the defaults of this table)
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
DEFAULT_SHUTDOWN_GRACE = 1.0


class WrapOption(NamedTuple):
    flag: str  # "--policy"
    param: str  # the cyclopts command's parameter name
    field: str  # the WrapConfig field it fills
    kind: type  # str, bool (a flag without a value), int or float; str options may default to None
    default: object


WRAP_OPTIONS: tuple[WrapOption, ...] = (
    WrapOption("--policy", "policy", "policy_path", str, DEFAULT_POLICY),
    WrapOption("--dry-run", "dry_run", "dry_run", bool, False),
    WrapOption("--verbose", "verbose", "verbose", bool, False),
    WrapOption("--label", "label", "label", str, DEFAULT_LABEL),
    WrapOption("--event-source", "event_source", "event_source", str, None),
    WrapOption("--decision-log", "decision_log", "decision_log", str, None),
    WrapOption("--audit-log", "audit_log", "audit_log", str, None),
    WrapOption("--deny-deprecations", "deny_deprecations", "deny_deprecations", bool, False),
    WrapOption("--max-frame-bytes", "max_frame_bytes", "max_frame_bytes", int, DEFAULT_MAX_FRAME_BYTES),
    WrapOption("--shutdown-grace", "shutdown_grace", "shutdown_grace", float, DEFAULT_SHUTDOWN_GRACE),
    WrapOption("--decision-log-new", "decision_log_new", "decision_log_new", str, None),
    WrapOption("--request-receipts-out", "request_receipts_out", "request_receipts_out", str, None),
    WrapOption("--session-context-out", "session_context_out", "session_context_out", str, None),
    WrapOption("--session-stop-out", "session_stop_out", "session_stop_out", str, None),
    WrapOption("--coverage-out", "coverage_out", "coverage_out", str, None),
    WrapOption("--state-window-out", "state_window_out", "state_window_out", str, None),
    WrapOption("--observed-manifest-out", "observed_manifest_out", "observed_manifest_out", str, None),
    WrapOption("--declared-manifest", "declared_manifest", "declared_manifest", str, None),
    WrapOption("--hide-denied-tools", "hide_denied_tools", "hide_denied_tools", bool, False),
)
BY_FLAG: dict[str, WrapOption] = {opt.flag: opt for opt in WRAP_OPTIONS}
_DIGITS = frozenset("0123456789")


def option_tokens(flag: str, value: str) -> list[str]:
    """The tokens that give a value option ``value`` in a command line assay writes (protect,
    config-path). A value that starts with ``-`` (a server named ``--`` or ``-x``, a path like
    ``-p.yaml``) would be read as an option of its own; joined to its flag it is only a value."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def defaults() -> dict[str, object]:
    """param -> default of every option."""
    return {opt.param: opt.default for opt in WRAP_OPTIONS}


def _plain_int(text: str) -> int | None:
    # ASCII digits only, no sign, no underscores, no leading zero: int() and cyclopts agree.
    if not text or not _DIGITS.issuperset(text) or (len(text) > 1 and text[0] == "0") or len(text) > 18:
        return None
    return int(text)


def _plain_float(text: str) -> float | None:
    whole, dot, frac = text.partition(".")
    if _plain_int(whole) is None or (dot and (not frac or not _DIGITS.issuperset(frac) or len(frac) > 9)):
        return None
    return float(text)


def parse_fast(tokens: Sequence[str]) -> tuple[dict[str, object], list[str]] | None:
    """``tokens`` after ``mcp wrap`` -> (param -> value for every option, server command), or
    ``None`` when the line is not a plain one and the cyclopts command must read it."""
    try:
        dash = tokens.index("--")
    except ValueError:
        return None
    command = list(tokens[dash + 1:])
    if not command:
        return None
    values = defaults()
    seen: set[str] = set()
    i = 0
    while i < dash:
        token = tokens[i]
        flag, eq, inline = token.partition("=")
        opt = BY_FLAG.get(flag)
        if opt is None or flag in seen:
            return None
        seen.add(flag)
        i += 1
        if opt.kind is bool:
            if eq:
                return None
            values[opt.param] = True
            continue
        if eq:
            text = inline
        elif i < dash:
            text = tokens[i]
            i += 1
        else:
            return None
        if not text or text.startswith("-"):
            return None
        value: object
        if opt.kind is int:
            value = _plain_int(text)
        elif opt.kind is float:
            value = _plain_float(text)
        else:
            value = text
        if value is None:
            return None
        values[opt.param] = value
    return values, command


def config_from(values: dict[str, object], command: Sequence[str]) -> WrapConfig:
    """A :class:`~assay.wrap.run.WrapConfig` from parsed values; a bad value is a UsageError."""
    from assay.cli.errors import UsageError
    from assay.wrap.run import WrapConfig

    if not command:
        raise UsageError("missing the command to wrap: assay mcp wrap [OPTIONS] -- <command> [args...]")
    max_frame_bytes = values["max_frame_bytes"]
    shutdown_grace = values["shutdown_grace"]
    assert isinstance(max_frame_bytes, int) and isinstance(shutdown_grace, (int, float))
    if max_frame_bytes < 1:
        raise UsageError("--max-frame-bytes must be a positive integer")
    if not (shutdown_grace >= 0 and shutdown_grace != float("inf")):
        raise UsageError("--shutdown-grace must be a non-negative number of seconds")
    fields = {opt.field: values[opt.param] for opt in WRAP_OPTIONS}
    return WrapConfig(argv=list(command), **fields)  # type: ignore[arg-type]


def launch(config: WrapConfig) -> int:
    """Run one wrap session under trio; a fatal start-up error is one `fatal: ...` line, exit 2."""
    import sys

    import trio

    from assay.cli.errors import fatal
    from assay.wrap.run import WrapError, run_wrap

    try:
        return trio.run(run_wrap, config)
    except WrapError as exc:
        sys.stdout.flush()
        return fatal(str(exc))


def import_trio() -> None:
    """Import trio without the `ldconfig -p` child its import starts.

    trio looks up libpthread with ``ctypes.util.find_library("pthread")`` when it is imported
    (to name its worker threads), and on Linux that runs `/sbin/ldconfig -p` and parses its
    output: a fork, an exec and 5-20 ms of every wrap start (measured on the loaded 2-core dev
    machine). Where ``libpthread.so.0`` opens, that is the answer find_library gives on glibc,
    so it is given at once; anywhere else (musl, not Linux) the real lookup runs. find_library
    is restored once trio is imported.
    """
    import sys

    if "trio" in sys.modules:
        return
    import ctypes.util

    real = ctypes.util.find_library

    def find_library(name: str) -> str | None:
        if name == "pthread" and sys.platform.startswith("linux"):
            try:
                ctypes.CDLL("libpthread.so.0")
            except OSError:
                return real(name)
            return "libpthread.so.0"
        return real(name)

    ctypes.util.find_library = find_library
    try:
        import trio  # noqa: F401
    finally:
        ctypes.util.find_library = real


def run(values: dict[str, object], command: Sequence[str]) -> int:
    """Parse result -> exit status: the one place both parsers hand a wrap run to."""
    import_trio()
    return launch(config_from(values, command))
