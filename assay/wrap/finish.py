"""A wrap run's end: the reports asked for and the exit status (docs/wrap.md, "One-run outputs
and session reports", "Lifecycle and exit status").

:func:`finish_reports` writes, once a session started, the coverage report
(``--coverage-out``), the state window (``--state-window-out``) and the observed manifest
(``--observed-manifest-out``: :func:`observed_manifest`; docs/manifest.md, "1. Get an observed
manifest"), each published as a new file, and gives the run's exit status: a nonzero wrapped
status wins, then a failed write (3). :func:`assay.wrap.run.run_prepared` calls it when the
relay has ended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from assay.session.reports import coverage_report, declared_tools_of, pretty_json, state_window

if TYPE_CHECKING:
    from assay.policy import Policy
    from assay.session.session import WrapSession
    from assay.wrap.options import WrapOptions

__all__ = ["finish_reports", "observed_manifest"]


def finish_reports(
    config: WrapOptions,
    policy: Policy,
    session: WrapSession,
    source: str | None,
    session_id: str,
    code: int,
    warn: Callable[[str], None],
) -> int:
    """Coverage, state window and observed manifest at session end, only if a session started.

    Exit precedence (docs/wrap.md, "One-run outputs and session reports"): a nonzero wrapped
    status wins, then coverage, then the state window (and observed manifest). Statuses: 3 for
    a write failure.
    """
    statuses: list[tuple[str, int]] = []
    jobs: list[tuple[str, str, str, Callable[[], Any]]] = []
    if config.coverage_out:
        declared = declared_tools_of(
            allow=policy.tools.allow,
            deny=policy.tools.deny,
            schema_keys=policy.schemas.keys(),
            pin_keys=policy.tool_pins.keys(),
        )
        jobs.append(
            ("coverage", config.coverage_out, "coverage_report_v1", lambda: coverage_report(session.coverage, declared))
        )
    if config.state_window_out:
        jobs.append(
            (
                "state-window",
                config.state_window_out,
                "session_state_window_v1",
                lambda: state_window(source or "", config.label, session_id),
            )
        )
    if config.observed_manifest_out:
        jobs.append(
            (
                "observed-manifest",
                config.observed_manifest_out,
                "assay.mcp_manifest_observed.v0",
                lambda: observed_manifest(session, config.label),
            )
        )
    for kind, path, schema, build in jobs:
        from assay.manifest.publish import publish_new  # only when a report is asked for

        try:
            publish_new(path, pretty_json(build()))
        except OSError as exc:
            warn(f"fatal: cannot write {schema} to {path}: {exc}")
            statuses.append((kind, 3))
            continue
        warn(f"Wrote {schema} to {path}")
    failed = [status for _kind, status in statuses]
    if code != 0:
        if failed:
            warn(
                f"Coverage/state-window generation failed after wrapped command exited with code {code}; "
                "preserving wrapped exit code"
            )
        return code
    return failed[0] if failed else 0


def observed_manifest(session: WrapSession, label: str) -> dict[str, Any]:
    """The last tools/list exchange (whole nextCursor chain) as an observed-v0 document."""
    from assay.manifest.observed import observed_document

    chain = session.last_chain
    if chain is None:
        return observed_document(label, None)
    return observed_document(label, chain.tools, complete=chain.complete)
