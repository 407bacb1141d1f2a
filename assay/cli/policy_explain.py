"""`assay mcp policy explain P --tool NAME` (docs/policy-tools.md, "assay mcp policy explain"):
the decision of one call and every check it passed or failed, from :mod:`assay.policy.explain`."""

from __future__ import annotations

import json as _json
import sys
from typing import Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError


def register(policy: cyclopts.App) -> None:
    @policy.command(name="explain")
    def explain_command(
        path: str,
        /,
        *,
        tool: Annotated[str, Parameter(name="--tool")],
        args: Annotated[str | None, Parameter(name="--args")] = None,
        server: Annotated[str, Parameter(name="--server")] = "default-mcp-server",
        claims: Annotated[str | None, Parameter(name="--claims")] = None,
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
        deny_deprecations: Annotated[bool, Parameter(name="--deny-deprecations", negative=())] = False,
    ) -> int:
        """Explain the decision of one tools/call: the verdict, the reason code, the rule, and each check in pipeline order.

        Exit codes: 0 the call would go through (allow, allow with warning, needs approval); 1 it is denied; 2 the policy does not load, bad --args or --claims, or a usage error.

        Parameters
        ----------
        path
            The policy file (assay.yaml).
        tool
            The tool name of the call.
        args
            The call's arguments as one JSON text (absent: the call has no arguments).
        server
            The server label the call goes to (wrap's --label; flow-rule selectors with server: read it).
        claims
            The user's claims as one JSON object, e.g. '{"groups": ["ops"]}': explain the call of that user of assay mcp serve (the policy's users entries whose when.claims they meet apply). Absent: no entry applies, as in wrap.
        json
            One JSON object instead of the text.
        deny_deprecations
            Refuse the deprecated v1 format, as wrap --deny-deprecations does.
        """
        from assay.canonical import loads_strict
        from assay.cli.policy_check import load
        from assay.policy.explain import explain, render

        arguments = None
        if args is not None:
            try:
                arguments = loads_strict(args)
            except (ValueError, RecursionError) as exc:
                raise UsageError(f"--args is not one JSON text: {exc}") from None
        user_claims = None
        if claims is not None:
            try:
                user_claims = loads_strict(claims)
            except (ValueError, RecursionError) as exc:
                raise UsageError(f"--claims is not one JSON text: {exc}") from None
            if not isinstance(user_claims, dict):
                raise UsageError('--claims must be a JSON object (claim name -> value), e.g. \'{"groups": ["ops"]}\'')
        loaded = load(path, deny_deprecations, lambda line: sys.stderr.write(line + "\n"))
        got = explain(loaded, tool, arguments, server=server, claims=user_claims)
        if json:
            sys.stdout.write(_json.dumps(got.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
        else:
            sys.stdout.write("".join(line + "\n" for line in render(got)))
        return 1 if got.verdict == "deny" else 0
