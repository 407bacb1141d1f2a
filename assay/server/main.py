"""Process entry of `assay-mcp-server`: arguments, environment checks, policy root, then serve.

Kept import-light on purpose: `assay mcp preflight` gives `--version` and the startup probe two
seconds each (docs/preflight.md), so YAML, jsonschema and trio load only once serving starts.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from assay._version import __version__
from assay.server.info import PROG

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def fatal_lines(message: str) -> str:
    """Prefix every line of a fatal report, even lines made by newlines inside a path."""
    return "".join(f"{PROG}: {line}\n" for line in _LINE_BREAK.split(message))


def _fatal(message: str, code: int = 1) -> int:
    sys.stderr.write(fatal_lines(message))
    sys.stderr.flush()
    return code


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        raise _UsageError(message)


class _Once(argparse.Action):
    """A value option that may be given only once (a repeated --policy-root is a usage error)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, "_seen_" + self.dest, False):
            raise argparse.ArgumentError(self, f"{option_string} given more than once")
        setattr(namespace, "_seen_" + self.dest, True)
        setattr(namespace, self.dest, values)


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="MCP server (stdio) exposing Assay policy-check tools.",
        exit_on_error=False,
    )
    parser.add_argument(
        "--policy-root",
        action=_Once,
        default="policies",
        metavar="DIR",
        help="directory that confines every policy path a tool receives (default: policies)",
    )
    parser.add_argument("-V", "--version", action="store_true", help="print the identity line and exit")
    return parser


def auth_variables(environ: Iterable[str]) -> list[str]:
    """Names of ASSAY_AUTH_* variables (prefix matched case-insensitively), sorted."""
    return sorted(name for name in environ if name.upper().startswith("ASSAY_AUTH_"))


def validate_root(root: str) -> str:
    """Canonicalise the policy root once; raise ValueError with the documented text when unusable."""
    try:
        real = os.path.realpath(root, strict=True)
    except OSError as exc:
        raise ValueError(f"invalid --policy-root: {exc.strerror or exc}") from None
    if not os.path.isdir(real):
        raise ValueError(f"invalid --policy-root: not a directory: {root}")
    return real


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    try:
        args = _parser().parse_args(args_in)
    except (_UsageError, argparse.ArgumentError) as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    if args.version:
        sys.stdout.write(f"{PROG} {__version__}\n")
        sys.stdout.flush()
        return 0
    names = auth_variables(os.environ)
    if names:
        return _fatal("ASSAY_AUTH_* configuration is unsupported for stdio server modes; unset: " + ", ".join(names))
    # env config -> logging -> server_start -> validate root -> serve. The fatal lines that
    # follow a refused root are prefixed, so they can never pass for a JSON log event.
    from assay.server.config import config_from_env
    from assay.server.log import TARGET_MAIN, Logger

    config = config_from_env(os.environ)
    logger = Logger(sys.stderr.buffer, config.log_filter)
    for name in config.invalid:  # keep the default, say so once; the value is not printed
        logger.event("WARN", TARGET_MAIN, "invalid_env_value", name=name)
    logger.event(
        "INFO",
        TARGET_MAIN,
        "server_start",
        policy_root=args.policy_root,
        timeout_ms=config.timeout_ms,
        max_msg_bytes=config.max_msg_bytes,
        max_policy_bytes=config.max_policy_bytes,
        max_tool_calls=config.max_tool_calls,
        max_field_bytes=config.max_field_bytes,
        cache_entries=config.cache_entries,
    )
    sys.stderr.flush()
    try:
        root = validate_root(args.policy_root)
    except ValueError as exc:
        return _fatal(str(exc))
    from assay.server.stdio import serve_stdio

    # While serving, the protocol only queues log lines; the serving loop writes them.
    return serve_stdio(root, config, Logger(None, config.log_filter, buffered=True))


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
