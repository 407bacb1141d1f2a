"""`assay mcp policy check P` (docs/policy-tools.md, "assay mcp policy check"): load P as wrap
loads it and print what the loader warns about; an unknown key is an error here (wrap loads the
file and ignores the key)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import Fatal

if TYPE_CHECKING:
    from assay.policy.model import Policy


def load(path: str, deny_deprecations: bool, warn: Callable[[str], object]) -> Policy:
    """The policy, loaded by :func:`assay.policy.load_policy_file` with wrap's strict mode
    (``--deny-deprecations`` or ``ASSAY_STRICT_DEPRECATIONS=1``); a file that does not load is
    :class:`Fatal` (one ``fatal: ...`` line, exit 2)."""
    from assay.policy import PolicyError, PolicyFileError, load_policy_file
    from assay.wrap.options import STRICT_DEPRECATIONS_ENV

    strict = deny_deprecations or os.environ.get(STRICT_DEPRECATIONS_ENV) == "1"
    try:
        return load_policy_file(path, strict_deprecations=strict, warn=warn)
    except (PolicyFileError, PolicyError) as exc:
        raise Fatal(str(exc)) from None


def register(policy: cyclopts.App) -> None:
    @policy.command(name="check")
    def check_command(
        path: str,
        /,
        *,
        strict: Annotated[bool, Parameter(name="--strict", negative=())] = False,
        deny_deprecations: Annotated[bool, Parameter(name="--deny-deprecations", negative=())] = False,
    ) -> int:
        """Load a policy file as assay mcp wrap does and print its warnings, one per line; an unknown key is an error.

        The policy file is YAML. Its keys, in short: version ("2.0"). tools: allow and deny (tool-name patterns: name, prefix*, *suffix, *infix*, *; once allow is present every tool not listed is denied; deny beats allow), approval_required (a person approves each call through the client), approval_fallback (deny or allow, for a client that cannot ask). schemas.<tool>: a JSON Schema the tool's arguments must match, else the call is denied. enforcement.unconstrained_tools: what a tool without a schema gets: allow, warn (allowed, logged as a warning) or deny. path_confinement: a list of {tools, args, within}: the named path arguments must lie inside these absolute directories after the path is normalized (.. resolved), so a schema pattern is never the way to confine a path. limits: max_requests_total, max_tool_calls_total, and tools: [{id, tools, max_calls, per}] rate limits. sequences (with aliases): flow rules over the calls of the agent session (never_after with for, before, require, max_calls, ...). inspect: what comes back and what calls send: secrets (mask, block, flag), injection (strip, block, flag), descriptions (hide, deny, flag), arguments: {secrets: deny, tainted: deny}. resources and prompts: allow and deny lists of URIs and names. tool_pins: the identities wrap --verbose prints. users: [{name, when: {claims: {groups: [ops]}}, tools: {allow, deny, ...}}]: lists added for the users of assay mcp serve whose token claims match (a claim equals an accepted value, or a list claim holds one; a deny always wins; never in wrap).

        Exit codes: 0 it loads (warnings printed; with --strict, none); 1 a key is unknown (wrap would ignore it), or --strict and there are warnings; 2 it does not load, or a usage error.

        Parameters
        ----------
        path
            The policy file (assay.yaml).
        strict
            Exit 1 when there is any warning.
        deny_deprecations
            Refuse the deprecated v1 format, as wrap --deny-deprecations does (also ASSAY_STRICT_DEPRECATIONS=1).
        """
        from assay.policy.convert import UNKNOWN_KEY_WARNING
        from assay.policy.lint import inspect_warnings, schema_warnings, summary, users_lint

        warnings: list[str] = []
        loaded = load(path, deny_deprecations, warnings.append)
        warnings += schema_warnings(loaded, path, warnings)
        warnings += inspect_warnings(loaded, path)
        warnings += users_lint(loaded, path)
        unknown = f"{path}: {UNKNOWN_KEY_WARNING}"
        errors = [w for w in warnings if w.startswith(unknown)]
        warnings = [w for w in warnings if not w.startswith(unknown)]
        out = [f"{path}: error: unknown key {w[len(unknown) :]}: wrap ignores it" for w in errors] + warnings
        parts = []
        if errors:
            parts.append(f"{len(errors)} unknown key{'s' if len(errors) != 1 else ''}")
        if warnings:
            parts.append(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''}")
        head = f"{path} loads" + (f" with {' and '.join(parts)}" if parts else "")
        failed = bool(errors) or (strict and bool(warnings))
        word = "error" if errors else "warnings" if failed else "ok"
        out.append(f"{word}: {head}: {summary(loaded)}")
        sys.stdout.write("".join(line + "\n" for line in out))
        return 1 if failed else 0
