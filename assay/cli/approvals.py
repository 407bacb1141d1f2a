"""`assay mcp approvals list|allow ID|deny ID --config serve.yaml` (docs/serve.md, "Out-of-band
approvers"): the calls a gateway with ``approvals: {approver: queue}`` holds for a person, read
and answered on the gateway's host, from the approvals queue of its state directory
(:mod:`assay.serve.approvals_queue`). Nothing is created.

Exit codes: 0 done; 1 no such approval, or it expired or was answered already (the first answer
wins); 2 the config cannot be read or names no queue, or the queue cannot be read.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Annotated, Literal

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import fatal
from assay.cli.output import aligned, local_time, write_out
from assay.cli.output import printable as _safe

if TYPE_CHECKING:
    from assay.serve.approvals_queue import ApprovalQueue

ARGUMENTS_SHOWN = 200  # characters of a call's arguments in the table (--json has them whole)


class _Bad(Exception):
    """One line; exit 2."""


def _queue(config: str) -> ApprovalQueue:
    from assay.cli.serve import load_config
    from assay.gateway.config import ConfigError
    from assay.inputs import InputFileError
    from assay.serve.approver import queue_of

    try:
        loaded = load_config(config)
    except InputFileError as exc:
        raise _Bad(f"cannot read config {config}: {exc}") from None
    except ConfigError as exc:
        raise _Bad(
            exc.problems[0] + (f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else "")
        ) from None
    if loaded.approvals is None or loaded.approvals.kind != "queue":
        raise _Bad(f"{os.path.basename(config)}: approvals.approver is not queue: there is no approvals queue to read")
    return queue_of(loaded)


def _who() -> str:
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError, ImportError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "?"
    return f"assay mcp approvals by {user} (pid {os.getpid()})"


def _answer(config: str, approval_id: str, decision: Literal["allow", "deny"]) -> int:
    from assay.serve.approvals_queue import QueueError

    try:
        queue = _queue(config)
        got = queue.answer(approval_id, decision, _who(), time.time())
    except _Bad as exc:
        return fatal(str(exc))
    except FileNotFoundError:
        got = "unknown"
    except QueueError as exc:
        return fatal(str(exc))
    shown = _safe(approval_id)
    if got == "ok":
        write_out(f"{'allowed' if decision == 'allow' else 'denied'} {shown}\n")
        return 0
    why = {
        "unknown": "no such approval",
        "expired": "it expired, or the call was settled without it",
        "answered": "it was answered already",
    }[got]
    sys.stderr.write(f"assay: approval {shown}: {why}\n")
    return 1


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    approvals = cyclopts.App(
        name="approvals",
        help="List and answer the tool calls a gateway holds for approval (approvals: {approver: queue}).",
        help_format="plaintext",
    )
    mcp.command(approvals)

    @approvals.command(name="list")
    def list_command(
        *,
        config: Annotated[str, Parameter(name="--config")],
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
    ) -> int:
        """List the calls waiting for an answer: id, user, upstream, tool, arguments, when it expires.

        Exit codes: 0 listed (none waiting too); 2 the config cannot be read or has no approvals queue, or the queue cannot be read.

        Parameters
        ----------
        config
            The gateway's config file (serve.yaml; docs/serve.md, "Out-of-band approvers").
        json
            One JSON object per line instead of the table.
        """
        from assay.serve.approvals_queue import QueueError

        try:
            rows = _queue(config).pending(time.time())
        except _Bad as exc:
            return fatal(str(exc))
        except FileNotFoundError:
            rows = []
        except QueueError as exc:
            return fatal(str(exc))
        if json:
            import json as j

            out = [
                j.dumps(
                    {
                        "id": r.id,
                        "subject": r.subject,
                        "server": r.server,
                        "tool": r.tool,
                        "arguments": j.loads(r.arguments),
                        "asked": r.asked,
                        "expires": r.expires,
                    },
                    ensure_ascii=True,
                    separators=(",", ":"),
                )
                + "\n"
                for r in rows
            ]
            write_out("".join(out))
            return 0
        if not rows:
            sys.stderr.write("no calls wait for approval\n")
            return 0
        lines = [("ID", "USER", "SERVER", "TOOL", "EXPIRES", "ARGUMENTS")]
        for r in rows:
            args = r.arguments if len(r.arguments) <= ARGUMENTS_SHOWN else r.arguments[:ARGUMENTS_SHOWN] + "…"
            lines.append(
                (r.id, _safe(r.subject or "-"), _safe(r.server), _safe(r.tool), local_time(r.expires), _safe(args))
            )
        write_out("\n".join(aligned(lines)) + "\n")
        return 0

    @approvals.command(name="allow")
    def allow_command(approval_id: str, /, *, config: Annotated[str, Parameter(name="--config")]) -> int:
        """Let the held call run (the first answer wins).

        Exit codes: 0 allowed; 1 no such approval, it expired, or it was answered already; 2 the config cannot be read or has no approvals queue.

        Parameters
        ----------
        approval_id
            The approval's id, as `assay mcp approvals list` shows it.
        config
            The gateway's config file (serve.yaml).
        """
        return _answer(config, approval_id, "allow")

    @approvals.command(name="deny")
    def deny_command(approval_id: str, /, *, config: Annotated[str, Parameter(name="--config")]) -> int:
        """Deny the held call (the first answer wins).

        Exit codes: 0 denied; 1 no such approval, it expired, or it was answered already; 2 the config cannot be read or has no approvals queue.

        Parameters
        ----------
        approval_id
            The approval's id, as `assay mcp approvals list` shows it.
        config
            The gateway's config file (serve.yaml).
        """
        return _answer(config, approval_id, "deny")
