"""`assay mcp log` (docs/log.md): the calls wrap decided, as a table, JSON lines or counts.

Parses, calls :mod:`assay.logs`, prints. Exit 0 (also when no call matched), 2 for a usage error
or a path that cannot be read; one line on stderr says how many lines were skipped and why.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import Fatal, UsageError
from assay.cli.output import write_out

if TYPE_CHECKING:
    from assay.logs.entries import Entry


def _since(value: str | None, now: float) -> float | None:
    if value is None:
        return None
    from assay.logs.entries import epoch
    from assay.policy.durations import DurationError, parse_duration

    if value[:-1].isdigit() and value.endswith("d"):  # days, beyond the policy's units
        return now - int(value[:-1]) * 86400.0
    try:
        return now - parse_duration(value)
    except DurationError:
        pass
    at = epoch(value)
    if at is None:
        raise UsageError(f"--since {value!r}: give a duration (30m, 2h, 1d) or an RFC 3339 time with a zone")
    return at


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v for value in values or () for v in value.split(",") if v)


def _width() -> int | None:
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


_OUTCOMES_HELP = (
    "Only these outcomes: allow, allow_with_warning, deny, would_deny; an approval state (approved, declined, "
    "cancelled, timed_out, failed, unavailable, not_asked, required) or approval (any); inspected (every finding) "
    "or an inspection action (mask, strip, mask+strip, block, flag, hide, pass, would_mask, ...). Repeat or "
    "comma-separate."
)


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="log")
    def log_command(
        paths: Annotated[list[str] | None, Parameter(name="PATH")] = None,
        /,
        *,
        follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative=())] = False,
        client: Annotated[list[str] | None, Parameter(name="--client", consume_multiple=False, negative=())] = None,
        server: Annotated[list[str] | None, Parameter(name="--server", consume_multiple=False, negative=())] = None,
        tool: Annotated[list[str] | None, Parameter(name="--tool", consume_multiple=False, negative=())] = None,
        subject: Annotated[list[str] | None, Parameter(name="--subject", consume_multiple=False, negative=())] = None,
        outcome: Annotated[
            list[str] | None, Parameter(name="--outcome", consume_multiple=False, negative=(), help=_OUTCOMES_HELP)
        ] = None,
        since: Annotated[str | None, Parameter(name="--since")] = None,
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
        stats: Annotated[bool, Parameter(name="--stats", negative=())] = False,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
    ) -> int:
        """Show the calls wrap decided: time, client/server, tool, outcome, reason code, rule, reason, arguments.

        Exit codes: 0 shown (also when no call matched); 2 usage error or a path that cannot be read.

        Parameters
        ----------
        paths
            Decision logs, audit logs, --decision-log-new files, or directories (their *.ndjson files); a log's rotated files are read with it. Default: the state directory (where the README's protect line puts the logs).
        follow
            Keep reading: show calls as they are appended (a rotated log too), until interrupted.
        client
            Only the calls of these clients, as protect names them (claude_desktop, cursor, ...; patterns; repeat or comma-separate).
        server
            Only these servers (--label; tool-name patterns such as 'git*'; with a slash, client/server: 'cursor/*'; repeat or comma-separate).
        tool
            Only these tools (tool-name patterns; repeat or comma-separate).
        subject
            Only the calls of these users of `assay mcp serve` (a token's sub or an API key's id, exactly; repeat or comma-separate).
        since
            Only calls since this long ago (30m, 2h, 1d) or since an RFC 3339 time.
        json
            One JSON object per call (stable keys, docs/log.md), or per client, server and tool with --stats.
        stats
            Calls per client, server, tool and outcome instead of one line per call.
        state_dir
            The state directory read when no PATH is given (default: $ASSAY_STATE_DIR, else $XDG_STATE_HOME/assay, else ~/.local/state/assay).
        """
        from assay.logs.files import Counts, FileSet, LogError, follow_files, log_files, log_paths, read_entries
        from assay.logs.view import Filter, Viewer

        if follow and stats:
            raise UsageError("--follow and --stats do not go together")
        try:
            keep = Filter(
                _split(server),
                _split(tool),
                _split(outcome),
                _since(since, time.time()),
                _split(client),
                _split(subject),
            )
        except ValueError as exc:
            raise UsageError(f"--outcome: {exc}") from None
        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        mode = ("stats-json" if json else "stats") if stats else ("json" if json else "table")
        view = Viewer(keep, mode=mode, width=_width(), colour=colour)
        counts = Counts()
        following = FileSet(counts, following=True) if follow else None
        try:
            given = log_paths(list(paths or ()), state_dir, os.environ)
            for entry in read_entries(log_files(given), counts, following=following):
                text = view.take(entry)
                if text and not write_out(text, flush=False):
                    return 0
            if not write_out(view.end_of_files()):
                return 0
            if following is not None:
                import trio

                def show(entry: Entry) -> bool:
                    text = view.take(entry)
                    return not text or write_out(text, flush=False)

                trio.run(partial(follow_files, end_of_round=lambda: write_out("")), given, following, show)
        except LogError as exc:  # a log that cannot be read: a failure, not a usage error
            raise Fatal(str(exc)) from None
        finally:
            told = counts.summary()
            if told:
                sys.stderr.write(f"assay: {told}\n")
        return 0
