"""Is a wrap line exactly one protect writes, or an earlier protect wrote? (docs/protect.md,
"Undo"): for a config protected by an older assay, which kept no record, undo restores only the
entries whose line is exactly ``wrapped_args`` of their own name, client, options and original
command; or that same line as an earlier protect wrote it (log names without the client, a
value that starts with ``-`` as a token of its own). The line is read by the one reader of wrap
lines, :func:`assay.clients.wrapped.parse_wrapped`. Sans-IO."""

from __future__ import annotations

import os
from collections.abc import Sequence

from assay.clients.protect.model import WrapOptions
from assay.clients.protect.wrapline import wrapped_args
from assay.clients.wrapped import parse_wrapped

__all__ = ["own_wrap_line"]


def _as_earlier(line: list[str], server_len: int) -> list[str]:
    """``line`` with every ``--flag=value`` option token split in two, as protect wrote it
    before a value that starts with ``-`` was joined to its flag."""
    head, tail = line[: len(line) - server_len], line[len(line) - server_len :]
    out: list[str] = []
    for token in head:
        flag, eq, value = token.partition("=")
        out += [flag, value] if eq and token.startswith("--") else [token]
    return out + tail


def own_wrap_line(name: str, command: str, args: Sequence[str], client: str = "") -> tuple[str, list[str]] | None:
    """The original ``(command, args)`` when ``command args`` is exactly the line protect
    writes (or an earlier protect wrote) for server ``name`` of ``client``, else None."""
    args = list(args)
    line = parse_wrapped([command, *args], written_by_older=True)
    if line is None or line.interpreter is not None or line.url is not None:
        return None
    found = line.options
    policy, decisions, manifest = found.get("policy_path"), found.get("decision_log"), found.get("declared_manifest")
    if not isinstance(policy, str):
        return None
    options = WrapOptions(
        command,
        policy,
        os.path.dirname(decisions) if isinstance(decisions, str) else None,
        observe=found.get("dry_run") is True,
        hide_denied_tools=found.get("hide_denied_tools") is True,
        declared_manifest=manifest if isinstance(manifest, str) else None,
        log_arguments=found.get("log_arguments") is True,
    )
    original = (line.command, list(line.args))
    server_len = 1 + len(line.server)  # "--" and the server's argv
    for who in dict.fromkeys((client, "")):  # this version's names, then an earlier version's
        written = wrapped_args(name, original[0], original[1], options, client=who)
        if args in (written, _as_earlier(written, server_len)):
            return original
    return None
