"""Is a wrap line exactly what this version of protect writes? (docs/protect.md, "Undo"): for
a config protected by an older assay, which kept no record, undo restores only the entries
whose line is exactly ``wrapped_args`` of their own name, options and original command. Sans-IO."""

from __future__ import annotations

import os
from collections.abc import Sequence

from assay.protect.model import WrapOptions
from assay.protect.wrapline import wrapped_args
from assay.wrap.options import BY_FLAG, flag_of

__all__ = ["own_wrap_line"]

_ASSAY_NAMES = frozenset({"assay", "assay.exe", "assay.cmd", "assay.bat"})


def _options(tokens: Sequence[str]) -> dict[str, object] | None:
    """The wrap options of ``tokens`` by flag, or None for a repeated or unknown one."""
    out: dict[str, object] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag, eq, value = token.partition("=")
        opt = BY_FLAG.get(flag)
        if opt is None or flag in out:
            return None
        if eq and opt.kind is not bool:
            out[flag] = value
            i += 1
        elif opt.kind is bool and not eq:
            out[flag] = True
            i += 1
        elif i + 1 < len(tokens):
            out[flag] = tokens[i + 1]
            i += 2
        else:
            return None
    return out


def own_wrap_line(name: str, command: str, args: Sequence[str]) -> tuple[str, list[str]] | None:
    """The original ``(command, args)`` when ``command args`` is exactly the line protect
    writes for server ``name``, else None."""
    if command.replace("\\", "/").rsplit("/", 1)[-1].lower() not in _ASSAY_NAMES:
        return None
    args = list(args)
    for sep in (i for i, t in enumerate(args) if t == "--"):
        if sep + 1 >= len(args) or args[:2] != ["mcp", "wrap"]:
            continue
        found = _options(args[2:sep])
        policy = None if found is None else found.get(flag_of("policy_path"))
        if not isinstance(policy, str):
            continue
        decisions = found.get(flag_of("decision_log")) if found else None
        manifest = found.get(flag_of("declared_manifest")) if found else None
        options = WrapOptions(
            command, policy, os.path.dirname(decisions) if isinstance(decisions, str) else None,
            observe=bool(found and found.get(flag_of("dry_run"))),
            hide_denied_tools=bool(found and found.get(flag_of("hide_denied_tools"))),
            declared_manifest=manifest if isinstance(manifest, str) else None,
        )
        original = (args[sep + 1], args[sep + 2 :])
        if wrapped_args(name, original[0], original[1], options) == args:
            return original
    return None
