"""`assay mcp wrap [OPTIONS] -- <command> [args...]` (wrap.md §1): parse, run, report."""

from __future__ import annotations

import sys
from typing import Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import UsageError, fatal


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="wrap")
    def wrap_command(
        *command: Annotated[str, Parameter(allow_leading_hyphen=True)],
        policy: Annotated[str, Parameter(name="--policy")] = "assay.yaml",
        dry_run: Annotated[bool, Parameter(name="--dry-run", negative="")] = False,
        verbose: Annotated[bool, Parameter(name="--verbose", negative="")] = False,
        label: Annotated[str, Parameter(name="--label")] = "default-mcp-server",
        event_source: Annotated[str | None, Parameter(name="--event-source")] = None,
        decision_log: Annotated[str | None, Parameter(name="--decision-log")] = None,
        audit_log: Annotated[str | None, Parameter(name="--audit-log")] = None,
        deny_deprecations: Annotated[bool, Parameter(name="--deny-deprecations", negative="")] = False,
        max_frame_bytes: Annotated[int, Parameter(name="--max-frame-bytes")] = 64 * 1024 * 1024,
        shutdown_grace: Annotated[float, Parameter(name="--shutdown-grace")] = 1.0,
    ) -> int:
        """Wrap an MCP server over stdio and enforce a policy on its tool calls.

        Parameters
        ----------
        command
            The MCP server command and its arguments, after a literal --.
        policy
            MCP policy file (YAML). Missing or invalid is fatal: never allow-all.
        dry_run
            Evaluate and log every decision, but block nothing.
        verbose
            Print one line per decision (and per newly seen tool) to stderr.
        label
            Server id used in tool identities and pins.
        event_source
            CloudEvents source URI (scheme://...), required with a log option.
        decision_log
            Append assay.tool.decision events (NDJSON) to this file.
        audit_log
            Append audit records (NDJSON) to this file.
        deny_deprecations
            Refuse deprecated (v1) policy formats.
        max_frame_bytes
            Largest client frame in bytes; longer ones are rejected (frame_too_large).
        shutdown_grace
            Seconds the server gets after client EOF before it is terminated.
        """
        import trio

        from assay.wrap.run import WrapConfig, WrapError, run_wrap

        if not command:
            raise UsageError("missing the command to wrap: assay mcp wrap [OPTIONS] -- <command> [args...]")
        if max_frame_bytes < 1:
            raise UsageError("--max-frame-bytes must be a positive integer")
        if not (shutdown_grace >= 0 and shutdown_grace != float("inf")):
            raise UsageError("--shutdown-grace must be a non-negative number of seconds")
        config = WrapConfig(
            argv=list(command),
            policy_path=policy,
            dry_run=dry_run,
            verbose=verbose,
            label=label,
            event_source=event_source,
            decision_log=decision_log,
            audit_log=audit_log,
            deny_deprecations=deny_deprecations,
            max_frame_bytes=max_frame_bytes,
            shutdown_grace=shutdown_grace,
        )
        try:
            return trio.run(run_wrap, config)
        except WrapError as exc:
            sys.stdout.flush()
            return fatal(str(exc))
