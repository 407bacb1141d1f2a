"""`assay mcp policy check P` (docs/policy-tools.md, "assay mcp policy check"): load P as wrap
loads it and print what the loader warns about."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError

if TYPE_CHECKING:
    from assay.policy.model import Policy


def load(path: str, deny_deprecations: bool, warn: Callable[[str], object]) -> Policy:
    """The policy, loaded by :func:`assay.policy.load_policy_file` with wrap's strict mode
    (``--deny-deprecations`` or ``ASSAY_STRICT_DEPRECATIONS=1``); a file that does not load is
    a :class:`UsageError` (one line, exit 2)."""
    from assay.policy import PolicyError, PolicyFileError, load_policy_file
    from assay.wrap.options import STRICT_DEPRECATIONS_ENV

    strict = deny_deprecations or os.environ.get(STRICT_DEPRECATIONS_ENV) == "1"
    try:
        return load_policy_file(path, strict_deprecations=strict, warn=warn)
    except (PolicyFileError, PolicyError) as exc:
        raise UsageError(str(exc)) from None


def register(policy: cyclopts.App) -> None:
    @policy.command(name="check")
    def check_command(
        path: str,
        /,
        *,
        strict: Annotated[bool, Parameter(name="--strict", negative=())] = False,
        deny_deprecations: Annotated[bool, Parameter(name="--deny-deprecations", negative=())] = False,
    ) -> int:
        """Load a policy file as assay mcp wrap does and print its warnings, one per line.

        Exit codes: 0 it loads (warnings printed; with --strict, none); 1 --strict and there are warnings; 2 it does not load, or a usage error.

        Parameters
        ----------
        path
            The policy file (assay.yaml).
        strict
            Exit 1 when there is any warning.
        deny_deprecations
            Refuse the deprecated v1 format, as wrap --deny-deprecations does (also ASSAY_STRICT_DEPRECATIONS=1).
        """
        from assay.policy.lint import inspect_warnings, schema_warnings, summary

        warnings: list[str] = []
        loaded = load(path, deny_deprecations, warnings.append)
        warnings += schema_warnings(loaded, path, warnings)
        warnings += inspect_warnings(loaded, path)
        out = list(warnings)
        head = f"{path} loads" + (f" with {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else "")
        failed = strict and bool(warnings)
        out.append(f"{'warnings' if failed else 'ok'}: {head}: {summary(loaded)}")
        sys.stdout.write("".join(line + "\n" for line in out))
        return 1 if failed else 0
