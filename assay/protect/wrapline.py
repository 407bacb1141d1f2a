"""The wrap line of a protected entry (docs/protect.md): ``<assay> mcp wrap --policy P --label
NAME [log options] -- <command> <args...>``, written with the flags of wrap's one option table
(:mod:`assay.wrap.options`) and read back as wrap reads it. Sans-IO."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

from assay.protect.model import WrapOptions
from assay.wrap.options import BY_FLAG, flag_of, option_tokens

__all__ = ["wrapped_args", "unwrap_args"]

_ASSAY_NAMES = frozenset({"assay", "assay.exe", "assay.cmd", "assay.bat"})
_DIGESTED = re.compile(r"-[0-9a-f]{8}\Z")  # a name that looks like a digested one gets one too


def _slug(name: str) -> str:
    """The name in file names and the event source. A name that is not already a plain file
    name ("my server", "my/server", "--", "") or has capitals ("GitHub": macOS and Windows
    file systems ignore case) gets a short digest of itself, so two servers of one config never
    share a log file."""
    plain = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    if plain and plain == name == name.lower() and not _DIGESTED.search(name):
        return name
    return f"{plain or 'server'}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def wrapped_args(name: str, command: str, args: Sequence[str], options: WrapOptions) -> list[str]:
    """The ``args`` of a protected entry whose ``command`` is ``options.assay``."""
    out = ["mcp", "wrap", *option_tokens(flag_of("policy_path"), options.policy), *option_tokens(flag_of("label"), name)]
    if options.log_dir is not None:
        slug = _slug(name)
        out += [
            *option_tokens(flag_of("event_source"), f"assay://protect/{slug}"),
            *option_tokens(flag_of("decision_log"), os.path.join(options.log_dir, f"{slug}.decisions.ndjson")),
            *option_tokens(flag_of("audit_log"), os.path.join(options.log_dir, f"{slug}.audit.ndjson")),
        ]
    if options.observe:
        out.append(flag_of("dry_run"))
    if options.hide_denied_tools:
        out.append(flag_of("hide_denied_tools"))
    if options.declared_manifest is not None:
        out += option_tokens(flag_of("declared_manifest"), options.declared_manifest)
    return out + ["--", command, *args]


def _is_assay(command: str) -> bool:
    return command.replace("\\", "/").rsplit("/", 1)[-1].lower() in _ASSAY_NAMES


def unwrap_args(command: str, args: Sequence[str]) -> tuple[str, list[str]] | None:
    """The original ``(command, args)`` of an entry protect wrote, or None when the entry is
    not of that shape (``<assay> mcp wrap [options] -- <command> [args...]``)."""
    if not _is_assay(command) or list(args[:2]) != ["mcp", "wrap"]:
        return None
    # Walk the options as wrap reads them: a value option given as two tokens takes the next
    # one whatever it looks like, so a label or path of "--" is not taken for the separator.
    i = 2
    while i < len(args):
        token = args[i]
        if token == "--":
            rest = list(args[i + 1 :])
            return (rest[0], rest[1:]) if rest else None
        opt = BY_FLAG.get(token)
        i += 1 if opt is None or opt.kind is bool else 2  # "--flag=value" is one token
    return None
